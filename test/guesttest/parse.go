package guesttest

import (
	"strconv"
	"strings"
)

// Resource is one line of `rdma resource show <kind>`: its key/value words.
type Resource struct {
	Kind string
	Line string
	KV   map[string]string
}

// Kernel reports whether the kernel owns the object (rdma prints the owner in brackets,
// e.g. "comm [ib_core]").
func (r Resource) Kernel() bool { return strings.HasPrefix(r.KV["comm"], "[") }

// PID is the creating thread's id, 0 if rdma printed none (the thread is gone).
func (r Resource) PID() int { n, _ := strconv.Atoi(r.KV["pid"]); return n }

// Listening reports whether r is an rdma_cm id in state LISTEN on addrPort as rdma prints
// it ("192.0.2.1:7174", "2001:db8::1:7174"); an addrPort of the form ":7174" matches the
// port on any address.
func (r Resource) Listening(addrPort string) bool {
	if r.KV["state"] != "LISTEN" {
		return false
	}
	src := r.KV["src-addr"]
	if strings.HasPrefix(addrPort, ":") {
		return strings.HasSuffix(src, addrPort)
	}
	return src == addrPort
}

// ParseResources parses the output of `rdma resource show <kind>`.
func ParseResources(kind, out string) []Resource {
	var rs []Resource
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		r := Resource{Kind: kind, Line: strings.TrimSpace(line), KV: map[string]string{}}
		// Keys are not all followed by one value (rdma prints some flags bare), so take
		// the word after the first occurrence of each word.
		for i := 0; i+1 < len(f); i++ {
			if _, seen := r.KV[f[i]]; !seen {
				r.KV[f[i]] = f[i+1]
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// V44SpuriousExit is the one stderr line of rdma-core v44's spurious exit 255
// (a bug of rping v44): after a successful run, rping's CM thread calls
// rdma_get_cm_event on the channel main has already closed, perror()s and
// exit(-1)s. Fixed upstream in v59 and stable v44.11 ("rping: Fix spurious
// failure return codes"); Debian bookworm ships 44.0 and trixie 56.1.
const V44SpuriousExit = "rdma_get_cm_event: Bad file descriptor"

// ServerEndOfPings is what stock rping's server prints when its client
// disconnected between pings: the normal end of a session.
const ServerEndOfPings = "wait for RDMA_READ_ADV state 10"

// StockExitOK reports whether a stock rping run that did everything it should
// (the caller checks stdout) exited well: 0, or 255 with nothing on stderr but
// v44's spurious-exit line and the harmless disconnect lines (bug says so).
func StockExitOK(code int, stderr string) (ok, bug bool) {
	if code == 0 {
		return true, false
	}
	other := 0
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		switch line {
		case V44SpuriousExit:
			bug = true
		case "client DISCONNECT EVENT...", ServerDisconnect, ServerEndOfPings, "":
		default:
			other++
		}
	}
	return code == 255 && bug && other == 0, bug
}
