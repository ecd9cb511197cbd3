// Package agent is the test bed's remote control of a multi-host guest: a small
// HTTP/JSON server (cmd guestagent, started by a cluster guest's /init on its
// management NIC) that starts processes, reports their output and exit status,
// signals them and powers the guest off; and the client the host side uses
// through QEMU's 127.0.0.1 port forward. Test-only: the product never links it.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Port is the guest TCP port the agent listens on (its management address).
const Port = 7070

// StartRequest starts a process in the guest.
type StartRequest struct {
	Args  []string `json:"args"`            // argv; Args[0] is looked up in PATH
	Env   []string `json:"env,omitempty"`   // added to the agent's environment
	Dir   string   `json:"dir,omitempty"`   // working directory ("" = the agent's)
	Stdin string   `json:"stdin,omitempty"` // written to stdin, then closed
}

// StartResponse names the started process.
type StartResponse struct {
	ID  int `json:"id"`
	PID int `json:"pid"`
}

// Status is a process's state and the output it printed from the offsets asked.
type Status struct {
	ID     int    `json:"id"`
	PID    int    `json:"pid"`
	Done   bool   `json:"done"`
	Code   int    `json:"code"`   // exit status; -1 if a signal ended it
	Signal string `json:"signal"` // the signal that ended it, if any
	Stdout string `json:"stdout"` // from the requested offset
	Stderr string `json:"stderr"`
	// Total bytes printed so far on each stream (the next offsets to ask for).
	StdoutLen int `json:"stdout_len"`
	StderrLen int `json:"stderr_len"`
}

// Error is the body of a failed request.
type Error struct {
	Error string `json:"error"`
}

// Client talks to one guest's agent.
type Client struct {
	Addr string // host:port of the forward, e.g. 127.0.0.1:40123
	HTTP *http.Client
}

// NewClient returns a client for the agent behind addr.
func NewClient(addr string) *Client {
	return &Client{Addr: addr, HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: false, MaxIdleConnsPerHost: 4}}}
}

func (c *Client) url(path string, q url.Values) string {
	u := "http://" + c.Addr + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), rd)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("agent %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("agent %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e Error
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("agent %s %s: %s", method, path, e.Error)
		}
		return fmt.Errorf("agent %s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("agent %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// Ping reports whether the agent answers.
func (c *Client) Ping(ctx context.Context) error { return c.do(ctx, "GET", "/v1/ping", nil, nil, nil) }

// Start starts a process.
func (c *Client) Start(ctx context.Context, r StartRequest) (StartResponse, error) {
	var resp StartResponse
	err := c.do(ctx, "POST", "/v1/start", nil, r, &resp)
	return resp, err
}

// Wait waits up to timeout for process id to exit and returns its status with
// all its output (Done false if it is still running).
func (c *Client) Wait(ctx context.Context, id int, timeout time.Duration) (Status, error) {
	var s Status
	q := url.Values{"id": {strconv.Itoa(id)}, "timeout_ms": {strconv.FormatInt(timeout.Milliseconds(), 10)}}
	err := c.do(ctx, "GET", "/v1/wait", q, nil, &s)
	return s, err
}

// Output returns process id's status and its output from the given offsets.
func (c *Client) Output(ctx context.Context, id, stdoutFrom, stderrFrom int) (Status, error) {
	var s Status
	q := url.Values{"id": {strconv.Itoa(id)}, "stdout_from": {strconv.Itoa(stdoutFrom)}, "stderr_from": {strconv.Itoa(stderrFrom)}}
	err := c.do(ctx, "GET", "/v1/output", q, nil, &s)
	return s, err
}

// Signal sends sig to process id's process group.
func (c *Client) Signal(ctx context.Context, id, sig int) error {
	q := url.Values{"id": {strconv.Itoa(id)}, "signal": {strconv.Itoa(sig)}}
	return c.do(ctx, "POST", "/v1/signal", q, nil, nil)
}

// KillAll kills every process the agent started that still runs and waits
// for them: a clean slate between tests.
func (c *Client) KillAll(ctx context.Context) error {
	return c.do(ctx, "POST", "/v1/killall", nil, nil, nil)
}

// WriteFile writes a file in the guest.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	q := url.Values{"path": {path}, "mode": {strconv.FormatUint(uint64(mode), 8)}}
	req, err := http.NewRequestWithContext(ctx, "PUT", c.url("/v1/file", q), bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("agent PUT /v1/file: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("agent PUT /v1/file %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// PowerOff powers the guest off at once (no sync, no service shutdown: the
// plug pulled). The answer comes before the power goes.
func (c *Client) PowerOff(ctx context.Context) error {
	return c.do(ctx, "POST", "/v1/poweroff", nil, nil, nil)
}
