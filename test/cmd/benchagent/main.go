// Command benchagent measures the mesh agent's own cost at native speed (issue 45,
// goal 1; `make bench-agent`): for each size it starts a child process that runs one
// real agent (mesh.NewIn: scheduling, probe loops, reconciliation, metrics, HTTP) over
// a fake connection at the dial seam, scrapes the child's /metrics over loopback every
// 15 s as Prometheus would, and prints one row per size: CPU per probe, % of one core,
// RSS, heap, goroutines, allocations per probe, scrape time and size. The CPU is the
// child's user+sys time only (/proc/PID/stat), so other load on the machine slows the
// run but does not add to the figure. A figure, not a test: nothing here passes or fails
// on speed. Test-only tooling, never in the product.
//
//	benchagent [-sizes 256,512,2048,8192] [-paths 4] [-warmup 20s] [-window 60s]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gorping/gorping/internal/meshenv"
	"github.com/gorping/gorping/mesh"
	"github.com/gorping/gorping/mesh/agentdesc"
	"github.com/gorping/gorping/rping"
)

func main() {
	child := flag.Bool("child", false, "run one agent (internal: the parent starts it)")
	targets := flag.Int("targets", 0, "child: the agent's targets")
	paths := flag.Int("paths", 4, "paths (connections) per target")
	delay := flag.Duration("delay", 50*time.Microsecond, "the fake connection's round trip")
	sizes := flag.String("sizes", "256,512,2048,8192", "total paths of each run, comma-separated (each a multiple of -paths)")
	warmup := flag.Duration("warmup", 20*time.Second, "time after the start before the measured window")
	window := flag.Duration("window", 60*time.Second, "the measured window")
	scrape := flag.Duration("scrape", 15*time.Second, "scrape interval")
	profile := flag.String("cpuprofile", "", "write each child's CPU profile, from its start to its end, to this file with .PATHS appended (go tool pprof)")
	flag.Parse()
	if *child {
		if err := runChild(*targets, *paths, *delay, *profile); err != nil {
			fmt.Fprintln(os.Stderr, "benchagent child:", err)
			os.Exit(1)
		}
		return
	}
	began := time.Now().UTC()
	var rows []row
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || n%*paths != 0 {
			fmt.Fprintf(os.Stderr, "benchagent: -sizes: %q is not a positive multiple of -paths %d\n", s, *paths)
			os.Exit(2)
		}
		prof := ""
		if *profile != "" {
			prof = fmt.Sprintf("%s.%d", *profile, n)
		}
		r, err := measure(n / *paths, *paths, *delay, *warmup, *window, *scrape, prof)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchagent: %d paths: %v\n", n, err)
			os.Exit(1)
		}
		rows = append(rows, r)
	}
	fmt.Printf("benchagent: %s to %s, %s/%s, %d CPUs, child GOMAXPROCS=1 (mesh.Schedule), interval 1s, %d paths per target, fake RTT %s, warm-up %s, window %s, scrape every %s\n",
		began.Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), *paths, *delay, *warmup, *window, *scrape)
	printTable(os.Stdout, rows)
}

// row is one size's figures over the window.
type row struct {
	paths, up         int
	probes            float64 // in the window
	cpu               time.Duration
	wall              time.Duration
	rss, hwm, maxrss  int64 // bytes: at the end, the peak (VmHWM), getrusage's
	heap              float64
	goroutines        float64
	mallocs           float64
	scrapes           int
	scrapeMax, scrape time.Duration // the longest and the mean
	scrapeBytes       int
}

func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "paths\tup\tprobes/s\tCPU/probe\t% core\tRSS MiB\tpeak RSS MiB\theap MiB\tgoroutines\tallocs/probe\tscrape ms (max)\tscrape KiB\t")
	for _, r := range rows {
		sec := r.wall.Seconds()
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.2f µs\t%.3f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t%.1f (%.1f)\t%.0f\t\n",
			r.paths, r.up, r.probes/sec, float64(r.cpu.Microseconds())/r.probes, 100*r.cpu.Seconds()/sec,
			mib(r.rss), mib(max(r.hwm, r.maxrss)), r.heap/(1<<20), r.goroutines, r.mallocs/r.probes,
			ms(r.scrape), ms(r.scrapeMax), float64(r.scrapeBytes)/1024)
	}
	tw.Flush()
}

func mib(b int64) float64        { return float64(b) / (1 << 20) }
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// measure runs one child with targets × paths and returns its figures.
func measure(targets, paths int, delay, warmup, window, every time.Duration, profile string) (row, error) {
	r := row{paths: targets * paths}
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	cmd := exec.Command(self, "-child", "-targets", strconv.Itoa(targets), "-paths", strconv.Itoa(paths), "-delay", delay.String(), "-cpuprofile", profile)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			return errors.New("the child did not stop within 30 s of SIGTERM (killed)")
		}
	}
	defer stop()
	addr, err := readAddr(out)
	if err != nil {
		return r, err
	}
	go io.Copy(io.Discard, out)
	url := "http://" + addr + "/metrics"
	pid := cmd.Process.Pid

	start := time.Now()
	next := start
	var t0 time.Time
	var cpu0 time.Duration
	var m0 map[string]float64
	var scrapeSum time.Duration
	for {
		next = next.Add(every)
		time.Sleep(time.Until(next))
		elapsed := time.Since(start)
		boundary := t0.IsZero() && elapsed >= warmup || !t0.IsZero() && time.Since(t0) >= window-every/2
		var cpu time.Duration
		if boundary {
			if cpu, err = procCPU(pid); err != nil {
				return r, err
			}
		}
		now := time.Now()
		m, took, size, err := scrapeOnce(url)
		if err != nil {
			return r, fmt.Errorf("scrape at %s: %w", elapsed.Round(time.Second), err)
		}
		if !t0.IsZero() {
			r.scrapes++
			scrapeSum += took
			r.scrapeMax = max(r.scrapeMax, took)
			r.scrapeBytes = size
		}
		if !boundary {
			continue
		}
		if t0.IsZero() {
			t0, cpu0, m0 = now, cpu, m
			r.scrapes, scrapeSum, r.scrapeMax = 1, took, took
			continue
		}
		r.wall, r.cpu = now.Sub(t0), cpu-cpu0
		r.probes = m["gorping_path_probes_total"] - m0["gorping_path_probes_total"]
		r.mallocs = m["go_memstats_mallocs_total"] - m0["go_memstats_mallocs_total"]
		r.heap, r.goroutines = m["go_memstats_heap_alloc_bytes"], m["go_goroutines"]
		r.up = int(m["gorping_path_up"])
		r.scrapes-- // the closing scrape belongs to the next window
		scrapeSum -= took
		r.scrape = scrapeSum / time.Duration(max(r.scrapes, 1))
		if r.rss, r.hwm, err = procRSS(pid); err != nil {
			return r, err
		}
		break
	}
	if r.probes <= 0 {
		return r, errors.New("no probes in the window (gorping_path_probes_total did not grow)")
	}
	if err := stop(); err != nil {
		return r, fmt.Errorf("the child: %w", err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxrss = ru.Maxrss << 10
	}
	return r, nil
}

// readAddr reads the child's first line, "listening ADDR", within 30 s.
func readAddr(out io.Reader) (string, error) {
	ch := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ch <- line
	}()
	select {
	case line := <-ch:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if !ok {
			return "", fmt.Errorf("the child's first line is %q, not \"listening ADDR\"", line)
		}
		return addr, nil
	case <-time.After(30 * time.Second):
		return "", errors.New("the child did not say where it listens within 30 s")
	}
}

// scrapeOnce fetches url and sums every sample of each family by name.
func scrapeOnce(url string) (map[string]float64, time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, 0, err
	}
	// The text format, as the agent serves it to a scraper that does not ask for more.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	t := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t)
	if err != nil {
		return nil, 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("parse %s: %w", url, err)
	}
	m := map[string]float64{}
	for name, f := range fams {
		for _, s := range f.GetMetric() {
			switch {
			case s.Counter != nil:
				m[name] += s.Counter.GetValue()
			case s.Gauge != nil:
				m[name] += s.Gauge.GetValue()
			case s.Untyped != nil:
				m[name] += s.Untyped.GetValue()
			}
		}
	}
	return m, took, len(body), nil
}

// procCPU is pid's user+sys time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// Fields 14 and 15 (utime, stime) in clock ticks; f[0] is field 3.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz, nil
}

// procRSS is pid's VmRSS and VmHWM in bytes.
func procRSS(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	return rss, hwm, nil
}

// runChild runs one agent with targets × paths over fake connections until SIGTERM.
func runChild(targets, paths int, delay time.Duration, profile string) error {
	mesh.Schedule()
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	cfg := mesh.DefaultConfig()
	cfg.AgentName, cfg.Version, cfg.Log = "benchagent", "benchagent", io.Discard
	cfg.Paths = paths
	// Targets in 198.18.0.0/15 (RFC 2544, benchmarking): nothing is ever sent to them,
	// the fake connection answers in-process.
	for i := range targets {
		a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		cfg.Peers = append(cfg.Peers, a.String())
	}
	local := netip.MustParseAddr("198.19.0.1")
	var qpn sync.Mutex
	next := uint32(0x100)
	a, err := mesh.NewIn(cfg, meshenv.Env{
		Dial: func(_ context.Context, _ netip.Addr, addr netip.AddrPort, path int, _ io.Writer) (meshenv.ProbeConn, error) {
			qpn.Lock()
			next += 2
			n := next
			qpn.Unlock()
			return &fakeConn{delay: delay, done: make(chan struct{}),
				flow: rping.Flow{LocalQPN: n, RemoteQPN: n + 1, SrcPort: uint16(32768 + n%28232), DstPort: addr.Port(),
					UDPSourcePort: 0xC000 | uint16(n)}}, nil
		},
		Local:     func() map[netip.Addr]bool { return map[netip.Addr]bool{local: true} },
		Rails:     func() []agentdesc.Rail { return nil },
		Listener:  ln,
		AgentDial: (&net.Dialer{}).DialContext,
	})
	if err != nil {
		ln.Close()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Printf("listening %s\n", ln.Addr())
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// fakeConn is one probing connection that answers every ping after a fixed delay.
type fakeConn struct {
	delay time.Duration
	flow  rping.Flow
	once  sync.Once
	done  chan struct{}
}

func (c *fakeConn) Ping(time.Duration) (time.Duration, error) {
	select {
	case <-c.done:
		return 0, &rping.ProbeError{Reason: rping.ReasonConnectError, Err: net.ErrClosed}
	default:
	}
	time.Sleep(c.delay)
	return c.delay, nil
}

func (c *fakeConn) LastSplit() (nic, host time.Duration, ok bool) { return 0, 0, false }
func (c *fakeConn) TSSource() string                              { return "sw" }
func (c *fakeConn) Done() <-chan struct{}                         { return c.done }
func (c *fakeConn) Device() string                                { return "fake0" }
func (c *fakeConn) Port() int                                     { return 1 }
func (c *fakeConn) Flow() rping.Flow                              { return c.flow }
func (c *fakeConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}
