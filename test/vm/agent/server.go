package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxOutput bounds what the agent keeps of one stream of one process; a
// longer output keeps its first part (offsets stay valid) and is marked cut.
const maxOutput = 32 << 20

// Server runs processes for the host. PowerOff is what /v1/poweroff calls
// (nil: refuse).
type Server struct {
	PowerOff func()

	mu    sync.Mutex
	next  int
	procs map[int]*proc
}

type proc struct {
	cmd    *exec.Cmd
	stdout buffer
	stderr buffer
	done   chan struct{}
	code   int
	signal string
}

// buffer is a growing output buffer safe for concurrent writes and reads.
type buffer struct {
	mu  sync.Mutex
	b   []byte
	cut bool
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxOutput - len(b.b); room < len(p) {
		if room > 0 {
			b.b = append(b.b, p[:room]...)
		}
		if !b.cut {
			b.b = append(b.b, "\n[agent: output cut]\n"...)
			b.cut = true
		}
		return len(p), nil
	}
	b.b = append(b.b, p...)
	return len(p), nil
}

func (b *buffer) from(off int) (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	off = max(0, min(off, len(b.b)))
	return string(b.b[off:]), len(b.b)
}

// Handler is the agent's HTTP API.
func (s *Server) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, r *http.Request) { reply(w, struct{}{}) })
	m.HandleFunc("POST /v1/start", s.start)
	m.HandleFunc("GET /v1/wait", s.wait)
	m.HandleFunc("GET /v1/output", s.output)
	m.HandleFunc("POST /v1/signal", s.signal)
	m.HandleFunc("POST /v1/killall", s.killAll)
	m.HandleFunc("PUT /v1/file", s.writeFile)
	m.HandleFunc("POST /v1/poweroff", func(w http.ResponseWriter, r *http.Request) {
		if s.PowerOff == nil {
			fail(w, http.StatusNotImplemented, errors.New("power-off not available"))
			return
		}
		reply(w, struct{}{})
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		go func() { time.Sleep(50 * time.Millisecond); s.PowerOff() }()
	})
	return m
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(Error{Error: err.Error()})
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Args) == 0 {
		fail(w, http.StatusBadRequest, fmt.Errorf("bad start request: %v", err))
		return
	}
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(req.Args[0], req.Args[1:]...)
	p.cmd.Env = append(os.Environ(), req.Env...)
	p.cmd.Dir = req.Dir
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if req.Stdin != "" {
		p.cmd.Stdin = strings.NewReader(req.Stdin)
	}
	// Own process group: a signal or kill reaches what the process started too.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("start %q: %w", req.Args, err))
		return
	}
	s.mu.Lock()
	if s.procs == nil {
		s.procs = map[int]*proc{}
	}
	s.next++
	id := s.next
	s.procs[id] = p
	s.mu.Unlock()
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.signal = ws.Signal().String()
			}
		} else if err != nil {
			p.code = -1
			p.signal = err.Error()
		}
		close(p.done)
	}()
	reply(w, StartResponse{ID: id, PID: p.cmd.Process.Pid})
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (int, *proc) {
	id, err := strconv.Atoi(r.URL.Query().Get("id"))
	s.mu.Lock()
	p := s.procs[id]
	s.mu.Unlock()
	if err != nil || p == nil {
		fail(w, http.StatusNotFound, fmt.Errorf("no process %q", r.URL.Query().Get("id")))
		return 0, nil
	}
	return id, p
}

func (p *proc) status(id, outFrom, errFrom int) Status {
	st := Status{ID: id, PID: p.cmd.Process.Pid}
	select {
	case <-p.done:
		st.Done, st.Code, st.Signal = true, p.code, p.signal
	default:
	}
	// Output after the exit check: a finished process's output is complete.
	st.Stdout, st.StdoutLen = p.stdout.from(outFrom)
	st.Stderr, st.StderrLen = p.stderr.from(errFrom)
	return st
}

func (s *Server) wait(w http.ResponseWriter, r *http.Request) {
	id, p := s.lookup(w, r)
	if p == nil {
		return
	}
	ms, _ := strconv.Atoi(r.URL.Query().Get("timeout_ms"))
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-r.Context().Done():
	}
	reply(w, p.status(id, 0, 0))
}

func (s *Server) output(w http.ResponseWriter, r *http.Request) {
	id, p := s.lookup(w, r)
	if p == nil {
		return
	}
	q := r.URL.Query()
	o, _ := strconv.Atoi(q.Get("stdout_from"))
	e, _ := strconv.Atoi(q.Get("stderr_from"))
	reply(w, p.status(id, o, e))
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	_, p := s.lookup(w, r)
	if p == nil {
		return
	}
	sig, err := strconv.Atoi(r.URL.Query().Get("signal"))
	if err != nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("bad signal: %w", err))
		return
	}
	select {
	case <-p.done:
		reply(w, struct{}{}) // already gone: nothing to signal
		return
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.Signal(sig)); err != nil && !errors.Is(err, syscall.ESRCH) {
		fail(w, http.StatusInternalServerError, fmt.Errorf("kill: %w", err))
		return
	}
	reply(w, struct{}{})
}

func (s *Server) killAll(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var running []*proc
	for _, p := range s.procs {
		select {
		case <-p.done:
		default:
			running = append(running, p)
		}
	}
	s.mu.Unlock()
	for _, p := range running {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, p := range running {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			fail(w, http.StatusInternalServerError, fmt.Errorf("pid %d did not die within 10s of SIGKILL", p.cmd.Process.Pid))
			return
		}
	}
	reply(w, struct{}{})
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	path := q.Get("path")
	mode, err := strconv.ParseUint(q.Get("mode"), 8, 32)
	if path == "" || err != nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("bad file request (path %q, mode %q)", path, q.Get("mode")))
		return
	}
	f, err := os.CreateTemp(dirOf(path), ".agent-*")
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	_, err = f.ReadFrom(r.Body)
	if err == nil {
		err = f.Chmod(os.FileMode(mode))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	// Renamed into place: a reader (an agent watching a targets file) never
	// sees it half written.
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		fail(w, http.StatusInternalServerError, err)
		return
	}
	reply(w, struct{}{})
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		return path[:i]
	}
	return "/"
}
