package rping

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorping/gorping/internal/trace"
)

// clockConn is a conn (only its timestamps matter) whose conversion is ns = ticks·10.
type clockConn struct{ conn }

func (clockConn) timestamps() tsInfo {
	return tsInfo{device: "mlx5_9", conv: func(ts uint64) (uint64, bool) { return ts * 10, true }}
}

// TestNICClockSplit: a ping's NIC time runs from its first SEND completion to its last
// receive completion; failed completions and completions without a timestamp are
// ignored; a NIC time that does not fit in the software time is no measurement (the
// ping is reported as software time, and that is said once).
func TestNICClockSplit(t *testing.T) {
	var stderr bytes.Buffer
	out := &printer{stdout: &bytes.Buffer{}, stderr: &stderr}
	var traced bytes.Buffer
	tr := trace.New(&traced, false)
	k := newNICClock(clockConn{}, out, nil, tr)
	if !strings.HasPrefix(stderr.String(), "gorping: mlx5_9: NIC completion timestamps: ") {
		t.Errorf("note %q", stderr.String())
	}
	stderr.Reset()
	ping := func(rtt time.Duration, cs ...completion) {
		for _, c := range cs {
			k.completion(c)
		}
		k.end(rtt)
	}
	ping(50*time.Microsecond,
		completion{kind: compSend, ts: 1000}, completion{kind: compRecv, ts: 1500},
		completion{kind: compSend, ts: 2000}, completion{kind: compRecv, ts: 4000},
		completion{kind: compRecv, ts: 0}, completion{kind: compSend, ts: 500, status: 12})
	if !k.ok || k.nic != 30*time.Microsecond || k.host != 20*time.Microsecond || k.source() != "nic" {
		t.Errorf("split ok %v nic %v host %v, want 30µs + 20µs", k.ok, k.nic, k.host)
	}
	k.trace(tr, 7, 50*time.Microsecond)
	if !regexp.MustCompile(`rtt +ping seq=7 rtt_ns=50000 ts_source=nic nic_rtt_ns=30000 host_ns=20000`).MatchString(traced.String()) {
		t.Errorf("trace %q", traced.String())
	}
	var b []byte
	if got := string(k.appendText(b)); got != " nic=0.030 ms host=0.020 ms" {
		t.Errorf("text %q", got)
	}
	if got := string(k.appendJSON(b)); got != `,"ts_source":"nic","nic_rtt_ns":30000,"host_ns":20000` {
		t.Errorf("json %q", got)
	}
	// The next ping starts afresh: a lone receive completion makes no split.
	ping(time.Millisecond, completion{kind: compRecv, ts: 9000})
	if k.ok || k.source() != "sw" || string(k.appendText(b)) != "" || string(k.appendJSON(b)) != `,"ts_source":"sw"` {
		t.Errorf("ping without a SEND timestamp: ok %v", k.ok)
	}
	// NIC 40 µs against 30 µs of software time: no measurement, said once.
	for range 2 {
		ping(30*time.Microsecond, completion{kind: compSend, ts: 10_000}, completion{kind: compRecv, ts: 14_000})
	}
	if k.ok || k.anomalies != 2 || strings.Count(stderr.String(), "do not fit this host's clock") != 1 {
		t.Errorf("anomalies %d, stderr %q", k.anomalies, stderr.String())
	}
	// Within the clocks' 0.1% allowance it is one, host time 0.
	ping(30*time.Microsecond, completion{kind: compSend, ts: 10_000}, completion{kind: compRecv, ts: 13_002})
	if !k.ok || k.host != 0 {
		t.Errorf("NIC 30.02µs in 30µs: ok %v host %v", k.ok, k.host)
	}
	// Recording allocates nothing.
	if n := testing.AllocsPerRun(100, func() {
		k.completion(completion{kind: compSend, ts: 1})
		k.completion(completion{kind: compRecv, ts: 2})
		k.end(time.Millisecond)
		b = k.appendJSON(b[:0])
	}); n != 0 {
		t.Errorf("%v allocations per ping", n)
	}
}

// TestStatsSaysSoftwareTime: a connection without NIC timestamps (here the fake
// transport) says so once on stderr with --stats, keeps rping-like per-ping lines, and
// labels every JSON ping and the summary ts_source "sw".
func TestStatsSaysSoftwareTime(t *testing.T) {
	cl, st := statsRun(t, 3, func(cfg *Config) { cfg.Stats = true })
	if st != 0 || cl.stderr.String() != "gorping: this connection: no NIC completion timestamps (its transport has none); round-trip times are software time (ts_source=sw)\n" {
		t.Errorf("exit %d, stderr %q", st, cl.stderr)
	}
	if strings.Contains(cl.stdout.String(), "nic") {
		t.Errorf("stdout mentions nic:\n%s", cl.stdout)
	}
	cl, st = statsRun(t, 3, func(cfg *Config) { cfg.Stats, cfg.JSON = true, true })
	out := cl.stdout.String()
	if st != 0 || strings.Count(out, `"ts_source":"sw"`) != 4 || strings.Contains(cl.stderr.String(), "timestamps") {
		t.Errorf("exit %d, JSON:\n%s\nstderr %q", st, out, cl.stderr)
	}
}
