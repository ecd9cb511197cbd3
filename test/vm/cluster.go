package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorping/gorping/test/freeport"
	"github.com/gorping/gorping/test/vm/agent"
)

// The multi-host test bed: N guests of one target on one virtual Ethernet
// (Switch), each with rxe0 on its eth0, stock rping, gorping and the agent
// (package agent) through which the host runs commands in it. Guests share one
// initramfs; /init learns its host number from the kernel command line.
//
//	host (127.0.0.1 only)            guest hN
//	  Switch port N  <-- UDP -->  eth0   10.0.3.N/24, 2001:db8:3::N/64, rxe0
//	  127.0.0.1:A    -- QEMU -->  mgmt0  10.0.2.15:7070 (the agent)
//
// The management NIC is QEMU user networking with restrict=on: the guest
// reaches nothing through it, and the host only through the forwards.

// ClusterModules are what a multi-host guest loads besides RDMAModules:
// its virtio NICs and netem for fault injection.
var ClusterModules = []KernelModule{
	{"virtio_pci", true},
	{"virtio_net", true},
	{"sch_netem", true},
}

// Network backends for the data link.
const (
	NetSwitch = "switch" // QEMU dgram netdevs and the host's Switch (default)
	NetSocket = "socket" // QEMU's TCP socket netdev, 2 hosts only (for comparison)
)

// ClusterOptions describe a multi-host test bed.
type ClusterOptions struct {
	Target
	Hosts      int // guests; default 2
	CPUs       int // vCPUs per guest; default 1
	MemoryMB   int // per guest; default 768
	ModuleRoot string
	CacheRoot  string
	Timeouts   Timeouts
	// Forwards are guest TCP ports, besides the agent's, that each host
	// forwards from a 127.0.0.1 port (Host.Forwards), e.g. a metrics port.
	Forwards []int
	Net      string // NetSwitch (default) or NetSocket
	// Rails is the number of RDMA rails per host (default 1): rail r is NIC
	// eth<r> with rxe<r> on its own switch and subnet (ClusterRailIPv4), the
	// shape of a rail-optimized GPU cluster. Rail 0 is the data NIC eth0.
	Rails int
	// NodeNet adds a network without RDMA between the hosts, on its own
	// switch (node0, ClusterNodeIPv4): the node address a cluster's hosts and
	// its agents know each other by.
	NodeNet bool
	Pcap    string      // capture every frame the switch forwards into this file
	Extra   []GuestFile // more files in every guest
	Keep    bool        // keep the work directory
	Out     io.Writer   // progress, prefixed "[suite/arch] "
	// Console receives the guests' consoles, prefixed "[suite/arch hN] " (nil:
	// none; each host keeps its last lines for failure reports anyway).
	Console io.Writer
}

// Cluster is a running multi-host test bed.
type Cluster struct {
	Target
	Kernel string
	Hosts  []*Host
	Switch *Switch // nil with NetSocket; rail 0's with Rails > 1
	// RailSwitches are the switches of rails 1..Rails-1 (index r-1), NodeSwitch
	// the node network's (nil without NodeNet).
	RailSwitches []*Switch
	NodeSwitch   *Switch

	opts           ClusterOptions
	work           string
	kernel, initrd string
	nonce          string
	socketPort     int
	ctx            context.Context
	cancel         context.CancelFunc
	log            *prefixWriter
}

// Host is one guest of a cluster.
type Host struct {
	Name       string // "h1"
	N          int    // 1-based
	IPv4, IPv6 string // eth0's addresses
	MAC        string // eth0's
	Rails      []Rail // every rail, rail 0 (eth0) first
	NodeIPv4   string // node0's address with ClusterOptions.NodeNet, else ""
	Agent      *agent.Client
	// Forwards maps each of ClusterOptions.Forwards (and agent.Port) to the
	// 127.0.0.1 address that reaches it.
	Forwards map[int]string

	c       *Cluster
	mu      sync.Mutex
	guest   *Guest
	exited  chan struct{} // closed when the current boot's console ends
	console []string      // the last console lines
	panics  []string
	// BootTimes are how long each boot took until the agent answered.
	BootTimes []time.Duration
}

// StartCluster fetches, builds and boots a cluster and returns it once every
// host's agent answers. The caller must Close it on every path.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if o.Hosts == 0 {
		o.Hosts = 2
	}
	if o.Hosts < 1 || o.Hosts > 250 {
		return nil, fmt.Errorf("cluster of %d hosts: 1..250", o.Hosts)
	}
	if o.CPUs == 0 {
		o.CPUs = 1
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = 768
	}
	if o.Net == "" {
		o.Net = NetSwitch
	}
	if o.Rails == 0 {
		o.Rails = 1
	}
	if o.Rails < 1 || o.Rails > MaxClusterRails {
		return nil, fmt.Errorf("%d rails: 1..%d", o.Rails, MaxClusterRails)
	}
	if o.Net == NetSocket && (o.Rails > 1 || o.NodeNet) {
		return nil, errors.New("the socket backend links one NIC: no extra rails, no node network")
	}
	if o.Net == NetSocket && o.Hosts != 2 {
		return nil, fmt.Errorf("the socket backend links exactly 2 hosts, not %d", o.Hosts)
	}
	if o.Net != NetSwitch && o.Net != NetSocket {
		return nil, fmt.Errorf("unknown network backend %q (%s or %s)", o.Net, NetSwitch, NetSocket)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	c := &Cluster{Target: o.Target, opts: o, log: &prefixWriter{w: o.Out, prefix: "[" + o.Target.String() + "] "}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()

	fctx, cancel := stepContext(ctx, StepFetch, o.Timeouts.Fetch)
	f := &Fetcher{Target: o.Target, Root: o.CacheRoot, Log: c.log}
	rootfs, err := f.Fetch(fctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("step fetch: %w", stepErr(fctx, err))
	}
	c.Kernel = rootfs.Manifest.Kernel
	bctx, cancel := stepContext(ctx, StepBuild, o.Timeouts.Build)
	err = c.build(bctx, rootfs)
	cancel()
	rootfs.Release()
	if err != nil {
		return nil, fmt.Errorf("step build: %w", stepErr(bctx, err))
	}

	if o.Net == NetSwitch {
		if c.Switch, err = NewSwitch(o.Hosts, o.Pcap); err != nil {
			return nil, err
		}
		for r := 1; r < o.Rails; r++ {
			sw, err := NewSwitch(o.Hosts, "")
			if err != nil {
				return nil, err
			}
			c.RailSwitches = append(c.RailSwitches, sw)
		}
		if o.NodeNet {
			if c.NodeSwitch, err = NewSwitch(o.Hosts, ""); err != nil {
				return nil, err
			}
		}
	} else if c.socketPort, err = freeport.Port("tcp4"); err != nil {
		return nil, err
	}
	for n := 1; n <= o.Hosts; n++ {
		h := &Host{Name: "h" + strconv.Itoa(n), N: n, IPv4: ClusterIPv4(n), IPv6: ClusterIPv6(n),
			MAC: fmt.Sprintf("%s%02x", ClusterDataMAC, n), c: c, Forwards: map[int]string{}}
		for r := 0; r < o.Rails; r++ {
			h.Rails = append(h.Rails, Rail{N: r, Netdev: "eth" + strconv.Itoa(r), Device: "rxe" + strconv.Itoa(r),
				IPv4: ClusterRailIPv4(r, n), IPv6: ClusterRailIPv6(r, n), MAC: ClusterRailMAC(r, n)})
		}
		if o.NodeNet {
			h.NodeIPv4 = ClusterNodeIPv4(n)
		}
		for _, gp := range append([]int{agent.Port}, o.Forwards...) {
			hp, err := freeport.Port("tcp4")
			if err != nil {
				return nil, err
			}
			h.Forwards[gp] = "127.0.0.1:" + strconv.Itoa(hp)
		}
		h.Agent = agent.NewClient(h.Forwards[agent.Port])
		c.Hosts = append(c.Hosts, h)
	}
	kvm, why := KVMUsable(o.Arch)
	accel := "KVM"
	if !kvm {
		accel = "TCG (no KVM: " + why + ")"
	}
	fmt.Fprintf(c.log, "booting %d hosts (kernel %s, %s, %d vCPU and %d MiB each, network %s)\n",
		o.Hosts, c.Kernel, accel, o.CPUs, o.MemoryMB, o.Net)
	errs := make([]error, len(c.Hosts))
	var wg sync.WaitGroup
	for i, h := range c.Hosts {
		if o.Net == NetSocket && i == 1 {
			// The connecting side needs the listener up (QEMU does not retry).
			if err := waitTCPListen(ctx, c.socketPort, o.Timeouts.Boot); err != nil {
				return nil, fmt.Errorf("h1's socket netdev: %w", err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.Boot(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// build compiles gorping and the agent for the target and packs the shared
// initramfs.
func (c *Cluster) build(ctx context.Context, r *Rootfs) error {
	o := c.opts
	work, err := os.MkdirTemp("", "gorping-cluster-"+o.Suite+"-"+o.Arch+"-")
	if err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	c.work = work
	gorun := goRunner(ctx, o.ModuleRoot, o.Arch)
	extra := append([]GuestFile(nil), o.Extra...)
	for _, b := range []struct{ pkg, guest string }{{".", GuestGorping}, {"./test/vm/guestagent", GuestAgent}} {
		out := filepath.Join(work, filepath.Base(b.guest))
		if _, err := gorun("build", "-o", out, b.pkg); err != nil {
			return err
		}
		extra = append(extra, GuestFile{Path: b.guest, Host: out, Mode: 0o755})
	}
	var modDir string
	c.kernel, modDir = kernelPaths(r)
	steps, notes, err := PlanModules(modDir, append(append([]KernelModule(nil), RDMAModules...), ClusterModules...))
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(c.log, "modules: %s\n", n)
	}
	c.nonce = nonce()
	initScript, err := InitScript(InitSpec{Nonce: c.nonce, Modules: steps, SetupTimeout: o.Timeouts.Setup * 3 / 4, Cluster: true,
		Rails: o.Rails, NodeNet: o.NodeNet})
	if err != nil {
		return err
	}
	im := &Image{Target: o.Target, Rootfs: r, Modules: steps, Init: initScript, Extra: extra}
	c.initrd = filepath.Join(work, "initramfs.cpio.gz")
	files, err := im.Write(c.initrd)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.log, "cluster initramfs: %d files\n", files)
	return nil
}

// netArgs are QEMU's NIC arguments for host h.
func (c *Cluster) netArgs(h *Host) []string {
	var data string
	switch {
	case c.opts.Net == NetSocket && h.N == 1:
		data = fmt.Sprintf("socket,id=data,listen=127.0.0.1:%d", c.socketPort)
	case c.opts.Net == NetSocket:
		data = fmt.Sprintf("socket,id=data,connect=127.0.0.1:%d", c.socketPort)
	default:
		data = c.Switch.NetdevArgs(h.N-1, "data")
	}
	mgmt := "user,id=mgmt,net=10.0.2.0/24,restrict=on"
	for gp, addr := range h.Forwards {
		mgmt += fmt.Sprintf(",hostfwd=tcp:%s-%s:%d", addr, ClusterMgmtIP, gp)
	}
	args := []string{
		// A link speed, as a NIC has (virtio reports none, and rxe then warns
		// on every port query).
		// romfile=: no iPXE option ROM (nothing boots from the network; under
		// TCG it only costs boot time).
		"-netdev", data, "-device", "virtio-net-pci,netdev=data,romfile=,mac=" + h.MAC + ",speed=25000,duplex=full",
		"-netdev", mgmt, "-device", fmt.Sprintf("virtio-net-pci,netdev=mgmt,romfile=,mac=%s%02x", ClusterMgmtMAC, h.N),
	}
	for r, sw := range c.RailSwitches {
		id := fmt.Sprintf("rail%d", r+1)
		args = append(args, "-netdev", sw.NetdevArgs(h.N-1, id),
			"-device", "virtio-net-pci,netdev="+id+",romfile=,mac="+h.Rails[r+1].MAC+",speed=25000,duplex=full")
	}
	if c.NodeSwitch != nil {
		args = append(args, "-netdev", c.NodeSwitch.NetdevArgs(h.N-1, "node"),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=node,romfile=,mac=%s%02x", ClusterNodeMAC, h.N))
	}
	return args
}

// Boot starts h's guest and waits until its agent answers (boot and setup
// deadlines of the cluster's Timeouts). h must be off.
func (h *Host) Boot(ctx context.Context) error {
	c := h.c
	h.mu.Lock()
	if h.guest != nil {
		h.mu.Unlock()
		return fmt.Errorf("%s is already running", h.Name)
	}
	kvm, _ := KVMUsable(c.Arch)
	q := QEMU{Arch: c.Arch, Kernel: c.kernel, Initrd: c.initrd, MemoryMB: c.opts.MemoryMB, CPUs: c.opts.CPUs, KVM: kvm,
		Net: c.netArgs(h), Cmdline: "gorping.host=" + strconv.Itoa(h.N)}
	pfx := "[" + c.Target.String() + " " + h.Name + "] "
	start := time.Now()
	g, err := q.Start(c.ctx, &prefixWriter{w: c.opts.Out, prefix: pfx + "qemu: "}) // QEMU's own errors always show
	if err != nil {
		h.mu.Unlock()
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	h.guest, h.exited = g, make(chan struct{})
	exited := h.exited
	h.mu.Unlock()

	ready := make(chan error, 1)
	go h.follow(g, exited, pfx, ready)
	fail := func(err error) error {
		h.PowerOff()
		if s := g.Stderr(); s != "" {
			err = fmt.Errorf("%w; qemu said: %s", err, s)
		}
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	deadline := c.opts.Timeouts.Boot + c.opts.Timeouts.Setup
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return fail(err)
		}
	case <-timer.C:
		return fail(fmt.Errorf("not ready within %s (boot and setup): %s", deadline, h.lastLine()))
	case <-ctx.Done():
		return fail(context.Cause(ctx))
	}
	// The agent starts right after the ready marker.
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := h.Agent.Ping(pctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-timer.C:
			return fail(fmt.Errorf("agent at %s (guest %s:%d) not answering within %s: %v", h.Forwards[agent.Port], ClusterMgmtIP, agent.Port, deadline, err))
		case <-exited:
			return fail(fmt.Errorf("guest exited before its agent answered: %s", h.lastLine()))
		case <-ctx.Done():
			return fail(context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
	took := time.Since(start)
	h.mu.Lock()
	h.BootTimes = append(h.BootTimes, took)
	h.mu.Unlock()
	var more string
	for _, r := range h.Rails[1:] {
		more += fmt.Sprintf(", %s %s %s", r.Netdev, r.IPv4, r.IPv6)
	}
	if h.NodeIPv4 != "" {
		more += ", node0 " + h.NodeIPv4
	}
	fmt.Fprintf(c.log, "%s up in %.1fs: eth0 %s %s%s, agent at %s\n", h.Name, took.Seconds(), h.IPv4, h.IPv6, more, h.Forwards[agent.Port])
	return nil
}

// follow reads one boot's console: it reports setup's outcome on ready, then
// keeps the last lines (and any panic) until QEMU's output ends.
func (h *Host) follow(g *Guest, exited chan struct{}, pfx string, ready chan<- error) {
	defer close(exited)
	cls := NewClassifier(h.c.nonce)
	report := func(err error) {
		if ready != nil {
			ready <- err
			ready = nil
		}
	}
	defer report(errors.New("QEMU exited before the guest was ready"))
	for line := range g.Lines {
		if h.c.opts.Console != nil {
			fmt.Fprintf(h.c.opts.Console, "%s%s\n", pfx, line)
		}
		h.mu.Lock()
		h.console = append(h.console, line)
		if len(h.console) > 200 {
			h.console = h.console[len(h.console)-100:]
		}
		h.mu.Unlock()
		ev := cls.Classify(line)
		switch ev.Kind {
		case EvModuleFail:
			report(fmt.Errorf("module %s failed to load: %s", ev.Name, ev.Msg))
		case EvRxeFail:
			report(fmt.Errorf("rxe link did not come up: %s", ev.Msg))
		case EvSetupFail:
			report(fmt.Errorf("guest setup failed: %s", ev.Msg))
		case EvPanic:
			h.mu.Lock()
			h.panics = append(h.panics, ev.Msg)
			h.mu.Unlock()
			report(fmt.Errorf("%w: %s", ErrPanic, ev.Msg))
		case EvReady:
			report(nil)
		}
	}
}

func (h *Host) lastLine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.console) == 0 {
		return "no console output"
	}
	return "last console line: " + h.console[len(h.console)-1]
}

// Boots is how many times h has booted (so a caller can tell that a process
// it started went down with an earlier boot).
func (h *Host) Boots() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.BootTimes)
}

// Running reports whether h's guest is up.
func (h *Host) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.guest != nil
}

// PowerOff pulls h's plug: QEMU is killed at once, the guest gets no chance to
// say goodbye on the network. It is a no-op for a host that is off.
func (h *Host) PowerOff() {
	h.mu.Lock()
	g, exited := h.guest, h.exited
	h.guest = nil
	h.mu.Unlock()
	if g == nil {
		return
	}
	g.Kill()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
	}
}

// Panics are the kernel panics h's guests printed, across boots.
func (h *Host) Panics() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.panics...)
}

// Console is the last lines h's guest printed on its console.
func (h *Host) Console() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.console...)
}

// Close powers every host off, stops the switch and removes the work
// directory (unless Keep).
func (c *Cluster) Close() {
	for _, h := range c.Hosts {
		h.PowerOff()
	}
	c.cancel()
	for _, sw := range append([]*Switch{c.Switch, c.NodeSwitch}, c.RailSwitches...) {
		if sw != nil {
			sw.Close()
		}
	}
	if c.work != "" && !c.opts.Keep {
		os.RemoveAll(c.work)
	}
}

// waitTCPListen waits until something listens on 127.0.0.1:port, reading
// /proc/net/tcp (a probing connect would be taken as QEMU's peer).
func waitTCPListen(ctx context.Context, port int, limit time.Duration) error {
	want := fmt.Sprintf("0100007F:%04X", port)
	deadline := time.Now().Add(limit)
	for {
		b, _ := os.ReadFile("/proc/net/tcp")
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && f[1] == want && f[3] == "0A" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on 127.0.0.1:%d after %s", port, limit)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ClusterInfo describes a running cluster to other processes (gx, scripts):
// guestrun writes it as JSON and points $GORPING_CLUSTER at it.
type ClusterInfo struct {
	Target string     `json:"target"`
	Kernel string     `json:"kernel"`
	Hosts  []HostInfo `json:"hosts"`
}

// HostInfo is one host of a ClusterInfo.
type HostInfo struct {
	Name     string            `json:"name"`
	IPv4     string            `json:"ipv4"`
	IPv6     string            `json:"ipv6"`
	Agent    string            `json:"agent"`    // 127.0.0.1:port of its agent
	Forwards map[string]string `json:"forwards"` // guest port -> 127.0.0.1:port
}

// Host finds a host by name.
func (ci ClusterInfo) Host(name string) (HostInfo, bool) {
	for _, h := range ci.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return HostInfo{}, false
}

// Info describes c.
func (c *Cluster) Info() ClusterInfo {
	ci := ClusterInfo{Target: c.Target.String(), Kernel: c.Kernel}
	for _, h := range c.Hosts {
		hi := HostInfo{Name: h.Name, IPv4: h.IPv4, IPv6: h.IPv6, Agent: h.Forwards[agent.Port], Forwards: map[string]string{}}
		for gp, a := range h.Forwards {
			hi.Forwards[strconv.Itoa(gp)] = a
		}
		ci.Hosts = append(ci.Hosts, hi)
	}
	return ci
}

// ReadClusterInfo reads the file guestrun wrote.
func ReadClusterInfo(path string) (ClusterInfo, error) {
	var ci ClusterInfo
	if path == "" {
		return ci, errors.New("GORPING_CLUSTER is not set: run inside guestrun -hosts N (-script or -hold)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ci, fmt.Errorf("cluster description: %w", err)
	}
	if err := json.Unmarshal(b, &ci); err != nil {
		return ci, fmt.Errorf("cluster description %s: %w", path, err)
	}
	return ci, nil
}

// Work is the cluster's work directory (binaries, initramfs, scratch).
func (c *Cluster) Work() string { return c.work }
