package rping

import (
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/uverbs"
)

// Config is one rping invocation as the command line describes it. The CLI fills
// it with rping's getopt rules; Run and the ping loops only read it.
type Config struct {
	Server bool // -s (true) or -c (false)

	// Addr is -a: the server's bind address, or the client's destination.
	// Default 0.0.0.0, which rping's client also connects to when -a is absent.
	Addr netip.Addr
	// SrcAddr is -I, the client's source address; the zero Addr (not IsValid)
	// means -I was not given. The server ignores it.
	SrcAddr netip.Addr

	Port  uint16 // -p, atoi truncated to 16 bits like rping's htobe16(atoi())
	Size  int    // -S, always within [MinSize, MaxSize]
	Count int    // -C; 0 pings forever, negative runs zero pings (as rping does)

	Verbose      bool // -v: print ping data
	Validate     bool // -V: client compares the echo with what it sent
	Debug        bool // -d: debug lines on Stdout
	Persistent   bool // -P: server keeps accepting clients
	SelfCreateQP bool // -q: the application creates and modifies the QP itself

	// gorping extensions (long options; rping has none of these).
	Poll     bool          // --poll: busy-poll the CQ instead of sleeping on the completion channel
	Stats    bool          // --stats: client prints each ping's round-trip time and a summary
	JSON     bool          // --json: JSON lines on Stdout; rping's stdout lines go to Stderr
	Trace    bool          // --trace: trace records (Stderr, or the JSON stream) and path diagnostics
	Interval time.Duration // -i: client waits this long between the starts of two pings
	Deadline time.Duration // -w: client ends the run this long after it started; 0 = none
	// Timeout is --timeout: how long a connection phase or a ping may make no
	// progress before gorping gives up and says why. 0 = the connection's RC
	// retry budget (stall.go); NoTimeout = wait for ever, as rping does.
	Timeout time.Duration

	// Stdout and Stderr receive rping's two output streams. With Persistent,
	// several connections write concurrently, one whole line per Write call,
	// so they must be safe for concurrent use (an *os.File is).
	Stdout, Stderr io.Writer

	rep *reporter     // set by Run for --stats/--json
	tr  *trace.Tracer // set by Run for --trace
	dg  *diagnostics  // set by Run for --trace, -d, --json
	// probe: the client is a Prober (ProbeConfig.client), which splits each ping with
	// NIC completion timestamps where the device stamps them (nicts.go).
	probe bool

	listening func() // Respond: called once the server's listener is up; nil otherwise
	// verbs opens the verbs context of a connection's device; nil: the device node
	// itself. Host tests open a device model (test/mlx5model, test/rxemodel) instead.
	verbs func(dev uverbs.Device) (*uverbs.Context, error)
	// cm opens the run's rdma_cm event channel; nil: host's rdma_cm node. Host tests
	// open the fake CM (fakecm_test.go), whose IDs connect over the device model.
	cm func() (cmChannel, error)
	// spin, with Poll, runs on every empty poll of the CQ (cqWait.spin); nil in the
	// product, which never yields. Host tests yield to the device model's engine.
	spin func()
	// host is where the devices, the rdma_cm node and the hints' netlink are: the zero
	// Host is this machine; tests pass one they describe.
	host uverbs.Host
}

// NoTimeout as Config.Timeout never gives up on a stalled connection (--timeout 0).
const NoTimeout time.Duration = -1

// DefaultConfig is rping's state before option parsing: client/server still
// undecided (Server false), address 0.0.0.0, port 7174, size 64, infinite count,
// writing to the process's stdout and stderr.
func DefaultConfig() Config {
	return Config{
		Addr:   netip.IPv4Unspecified(),
		Port:   DefaultPort,
		Size:   DefaultSize,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	}
}

// openVerbs opens dev's verbs context: the process's shared one for a connection, a
// context of its own for librdmacm's check that the device opens (probeDevice).
func (c *Config) openVerbs(dev uverbs.Device, shared bool) (*uverbs.Context, error) {
	switch {
	case c.verbs != nil:
		return c.verbs(dev)
	case shared:
		return uverbs.OpenShared(dev, uverbs.WithTracer(c.tr))
	}
	return uverbs.Open(dev, uverbs.WithTracer(c.tr))
}

// openCM opens the run's rdma_cm event channel.
func (c *Config) openCM() (cmChannel, error) {
	if c.cm != nil {
		return c.cm()
	}
	ch, err := rdmacm.Open(rdmacm.WithTracer(c.tr), rdmacm.WithHost(c.host))
	if err != nil {
		return nil, err
	}
	return rdmaChannel{ch}, nil
}

// HasSrcAddr reports whether -I was given.
func (c *Config) HasSrcAddr() bool { return c.SrcAddr.IsValid() }
