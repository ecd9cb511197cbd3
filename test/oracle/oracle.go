package oracle

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed csrc/harness.c
var harnessSrc []byte

// ErrUnavailable wraps every reason the oracle cannot run on this machine (no gcc, no
// libibverbs-dev/ibverbs-providers, not x86-64/arm64 Linux).
var ErrUnavailable = errors.New("oracle unavailable")

var (
	buildMu    sync.Mutex
	buildCache = map[string]buildResult{}
)

type buildResult struct {
	path string
	err  error
}

// Build compiles the harness for d with gcc against the system libibverbs (once per
// process and driver; the binary is cached under the user cache dir, keyed by the source
// and the arguments).
func Build(d Driver) (string, error) { return buildVariant(d, false) }

// buildVariant builds the harness; noStep leaves device pages writable and records only
// their content (what non-x86-64 hosts do), so that path is tested on x86-64 too.
func buildVariant(d Driver, noStep bool) (string, error) {
	args := append([]string{"-O1", "-g", "-Wall", "-rdynamic"}, d.BuildArgs()...)
	if noStep {
		args = append(args, "-DORACLE_NO_STEP")
	}
	key := d.Library() + fmt.Sprint(args)
	buildMu.Lock()
	defer buildMu.Unlock()
	if r, ok := buildCache[key]; ok {
		return r.path, r.err
	}
	p, err := build(d.Library(), args)
	buildCache[key] = buildResult{p, err}
	return p, err
}

func build(lib string, args []string) (string, error) {
	if _, err := exec.LookPath("gcc"); err != nil {
		return "", fmt.Errorf("%w: gcc not found (install gcc)", ErrUnavailable)
	}
	for _, f := range []string{"/usr/include/infiniband/verbs.h", "/etc/libibverbs.d/" + lib + ".driver"} {
		if _, err := os.Stat(f); err != nil {
			return "", fmt.Errorf("%w: %s missing (install libibverbs-dev ibverbs-providers)", ErrUnavailable, f)
		}
	}
	h := sha256.New()
	h.Write(harnessSrc)
	fmt.Fprint(h, args)
	sum := h.Sum(nil)
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "gorping", "oracle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("oracle cache dir: %w", err)
	}
	bin := filepath.Join(dir, "harness-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("oracle build dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "harness.c")
	if err := os.WriteFile(src, harnessSrc, 0o644); err != nil {
		return "", fmt.Errorf("oracle source: %w", err)
	}
	out := filepath.Join(tmp, "harness")
	var libs []string
	var cargs []string
	for _, a := range args {
		if strings.HasPrefix(a, "-l") {
			libs = append(libs, a)
		} else {
			cargs = append(cargs, a)
		}
	}
	cmd := exec.Command("gcc", append(append(cargs, "-o", out, src, "-libverbs"), libs...)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: gcc harness.c: %v\n%s", ErrUnavailable, err, msg)
	}
	if err := os.Rename(out, bin); err != nil {
		return "", fmt.Errorf("oracle cache: %w", err)
	}
	return bin, nil
}

// Store is one store to a device page, in program order: the page's name (the driver's:
// "uar<i>", "db"), byte offset in the page, width in bytes (0 if the harness could not
// decode the instruction), and the bytes stored as they lie in memory.
type Store struct {
	Page  string `json:"page"`
	Off   int    `json:"off"`
	Width int    `json:"width"`
	Bytes []byte `json:"bytes"`
}

// SeqEvent is one device-visible event of a step, in program order: a store to a device
// page or a doorbell record (Target the page's name or the record's region, "qp0.db"; Off
// within it; Width; Bytes as stored), or an ordering instruction (Fence: "sfence",
// "lfence", "mfence", "locked") executed inside a data-path verb (send, recv, poll, arm),
// which the harness runs single-stepped on x86-64. Stores to a doorbell-record page
// outside any known record (the library initialising a new slot) have Target "dbpage".
type SeqEvent struct {
	Target string `json:"target,omitempty"`
	Off    int    `json:"off,omitempty"`
	Width  int    `json:"width,omitempty"`
	Bytes  []byte `json:"bytes,omitempty"`
	Fence  string `json:"fence,omitempty"`
}

func (e SeqEvent) String() string {
	if e.Fence != "" {
		return e.Fence
	}
	return fmt.Sprintf("%s+%#x/%d[% x]", e.Target, e.Off, e.Width, e.Bytes)
}

// Mmap is one mmap of the uverbs fd.
type Mmap struct {
	Off   uint64 `json:"off"`
	Len   int    `json:"len"`
	Prot  int    `json:"prot"`
	Flags int    `json:"flags"`
}

// WC is one ibv_wc as ibv_poll_cq returned it. Status, Opcode and WCFlags carry
// libibverbs' enum values (ibv_wc_status, ibv_wc_opcode, ibv_wc_flags: GRH 1,
// WITH_IMM 2, IP_CSUM_OK 4, WITH_INV 8). ImmData is be32toh(imm_data) — for WITH_INV
// completions that union holds the invalidated rkey, which InvalidatedRKey gives as
// the library reports it (host order).
type WC struct {
	WRID            uint64 `json:"wr_id"`
	Status          int    `json:"status"`
	Opcode          int    `json:"opcode"`
	VendorErr       uint32 `json:"vendor_err"`
	ByteLen         uint32 `json:"byte_len"`
	ImmData         uint32 `json:"imm_data"`
	QPNum           uint32 `json:"qp_num"`
	SrcQP           uint32 `json:"src_qp"`
	WCFlags         uint32 `json:"wc_flags"`
	PKeyIndex       uint16 `json:"pkey_index"`
	SLID            uint16 `json:"slid"`
	SL              uint8  `json:"sl"`
	DLIDPathBits    uint8  `json:"dlid_path_bits"`
	InvalidatedRKey uint32 `json:"invalidated_rkey"` // WITH_INV only
	// poll_ts only: the completion timestamp (device cycles) and libmlx5's
	// mlx5dv_ts_to_ns of it with the clock_info page.
	TS uint64 `json:"ts"`
	NS uint64 `json:"ns"`
}

// Result holds what a step returned; only the fields of its kind are set.
type Result struct {
	Ret   int `json:"ret"`   // 0 or -1
	Errno int `json:"errno"` // errno (or the verbs return code) when Ret != 0
	// open
	NDev   int    `json:"ndev"`
	Name   string `json:"name"`
	Ioctls int    `json:"ioctls"` // ioctls refused with ENOTTY so far
	// query_port
	State     int `json:"state"`
	LID       int `json:"lid"`
	LinkLayer int `json:"link_layer"`
	ActiveMTU int `json:"active_mtu"`
	// mr
	LKey uint32 `json:"lkey"`
	RKey uint32 `json:"rkey"`
	// cq
	CQE int `json:"cqe"`
	// qp: caps as the library reports them after ibv_create_qp
	QPN        uint32 `json:"qpn"`
	MaxSendWR  uint32 `json:"max_send_wr"`
	MaxRecvWR  uint32 `json:"max_recv_wr"`
	MaxSendSGE uint32 `json:"max_send_sge"`
	MaxRecvSGE uint32 `json:"max_recv_sge"`
	MaxInline  uint32 `json:"max_inline_data"`
	// rts: return codes of the three modifies
	Init int `json:"init"`
	RTR  int `json:"rtr"`
	RTS  int `json:"rts"`
	// send/recv: index of bad_wr, -1 if none
	Bad int `json:"bad"`
	// poll
	N  int  `json:"n"`
	WC []WC `json:"wc"`
	// event: id of the CQ ibv_get_cq_event returned
	CQ int `json:"cq"`
	// query_device_ex
	TSMask   uint64 `json:"ts_mask"`
	HCAClock uint64 `json:"hca_clock"`
	// poll_ts: mlx5dv_get_clock_info's return code
	ClockErr int `json:"clock_err"`
}

// StepRecord is everything observed during one step.
type StepRecord struct {
	Step   Step
	Line   string
	Result Result
	Cmds   []Cmd
	Mmaps  []Mmap
	Stores []Store
	// Seq is the step's device-visible sequence (x86-64 only, where stores are
	// single-stepped): every UAR and doorbell-record store, and for data-path verbs the
	// fences between them.
	Seq []SeqEvent
	// Stepped: the harness single-stepped this step's stores (Seq is complete).
	Stepped bool
	// Mem is the content of every watched region (see Fake.Regions) after the step;
	// Changed lists the regions whose content differs from the previous step (or that
	// appeared in it).
	Mem     map[string][]byte
	Changed []string
	// Pages is the content of every device page after the step: the stores replayed
	// onto the pages as mapped (x86-64), or the pages as the library left them where
	// single-stepping is unavailable. A provider's pages must read the same.
	Pages map[string][]byte
}

// Record is the oracle's account of one scenario run.
type Record struct {
	Scenario   string
	SingleStep bool // stores were captured one by one (x86-64)
	Steps      []StepRecord
	Regions    []Region // as learned by the fake (addresses are this run's)
	Cmds       []Cmd    // every command, in order
	Stderr     string   // what the harness and the libraries printed (warnings)
}

// Run builds the harness if needed and runs sc against a fresh Fake of sc.Driver.
func Run(ctx context.Context, sc Scenario) (*Record, error) {
	return RunWith(ctx, sc, Options{})
}

// Options vary how the harness runs.
type Options struct {
	// NoSingleStep records device page contents instead of single-stepping each store
	// (what non-x86-64 hosts always do).
	NoSingleStep bool
}

// RunWith is Run with options.
func RunWith(ctx context.Context, sc Scenario, o Options) (*Record, error) {
	bin, err := buildVariant(sc.Driver, o.NoSingleStep)
	if err != nil {
		return nil, err
	}
	// The bound is generous: the fake kernel answering the harness runs in the test
	// binary, which make unit-arm64 runs under qemu-user, many times slower.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sysfs, err := os.MkdirTemp("", "oracle-sysfs-")
	if err != nil {
		return nil, fmt.Errorf("oracle sysfs: %w", err)
	}
	defer os.RemoveAll(sysfs)
	if err := writeSysfs(sysfs, sc.Driver.Sysfs()); err != nil {
		return nil, err
	}

	cmd := exec.CommandContext(ctx, bin, sysfs)
	// The providers' tuning variables (MLX5_*, BNXT_*, IRDMA_*, HNS_*) would change what
	// the library does: the harness runs without them.
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if name != "SYSFS_PATH" && !strings.HasPrefix(name, "MLX5_") && !strings.HasPrefix(name, "BNXT_") &&
			!strings.HasPrefix(name, "IRDMA_") && !strings.HasPrefix(name, "HNS_") && !strings.HasPrefix(name, "RDMAV_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("ORACLE_PAGE_SIZE=%d", Page(sc.Driver)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("oracle start: %w", err)
	}
	rec, perr := drive(sc, stdin, stdout)
	stdin.Close()
	io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if rec != nil {
		rec.Stderr = stderr.String()
	}
	if perr != nil && ctx.Err() != nil {
		perr = fmt.Errorf("%w; the harness was killed at the 2-minute bound", perr)
	}
	if perr != nil {
		return rec, fmt.Errorf("oracle %s (%s): %w (stderr: %s)", sc.Name, sc.Driver.Library(), perr, strings.TrimSpace(stderr.String()))
	}
	if werr != nil {
		return rec, fmt.Errorf("oracle %s (%s): harness: %w (stderr: %s)", sc.Name, sc.Driver.Library(), werr, strings.TrimSpace(stderr.String()))
	}
	return rec, nil
}

// Page is d's page size (PageSize, or 4096).
func Page(d Driver) int {
	if p := d.PageSize(); p != 0 {
		return p
	}
	return 4096
}

// writeSysfs writes the fake sysfs tree under root.
func writeSysfs(root string, files map[string]string) error {
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("oracle sysfs: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("oracle sysfs: %w", err)
		}
	}
	return nil
}

type event struct {
	Ev         string `json:"ev"`
	SingleStep int    `json:"single_step"`
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Hex        string `json:"hex"`
	Page       string `json:"page"`
	Off        uint64 `json:"off"`
	Width      int    `json:"width"`
	Len        int    `json:"len"`
	Prot       int    `json:"prot"`
	Flags      int    `json:"flags"`
	I          int    `json:"i"`
}

func drive(sc Scenario, stdin io.Writer, stdout io.Reader) (*Record, error) {
	rec := &Record{Scenario: sc.Name}
	fake := NewFake(sc.Driver)
	w := bufio.NewWriter(stdin)
	w.WriteString(sc.Script())
	w.WriteString("end\n")
	if err := w.Flush(); err != nil {
		return rec, fmt.Errorf("script: %w", err)
	}
	sc2 := bufio.NewScanner(stdout)
	sc2.Buffer(make([]byte, 1<<20), 1<<26)
	mem := map[string][]byte{}
	pages := map[string][]byte{}
	cur := StepRecord{}
	done := false
	for sc2.Scan() {
		line := sc2.Text()
		switch {
		case strings.HasPrefix(line, "Q "):
			f := strings.Fields(line)
			if len(f) < 4 {
				return rec, fmt.Errorf("bad query %q", line)
			}
			num, err1 := strconv.ParseUint(f[1], 10, 32)
			inW, err2 := strconv.Atoi(f[2])
			outW, err3 := strconv.Atoi(f[3])
			var in []byte
			var err4 error
			if len(f) > 4 {
				in, err4 = hex.DecodeString(f[4])
			}
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				return rec, fmt.Errorf("bad query %q: %w", line, err)
			}
			out, errno, regs := fake.Answer(uint32(num), inW, outW, in)
			for _, r := range regs {
				fmt.Fprintf(w, "W %s %x %d\n", r.Name, r.Addr, r.Len)
			}
			fmt.Fprintf(w, "A %d %s\n", int(errno), hex.EncodeToString(out))
			if err := w.Flush(); err != nil {
				return rec, fmt.Errorf("answer: %w", err)
			}
			cur.Cmds = append(cur.Cmds, fake.Cmds[len(fake.Cmds)-1])
		case strings.HasPrefix(line, "M "):
			var off uint64
			var n, prot, flags int
			if _, err := fmt.Sscanf(line, "M %d %d %d %d", &off, &n, &prot, &flags); err != nil {
				return rec, fmt.Errorf("bad mmap query %q: %w", line, err)
			}
			page, fill, errno := sc.Driver.Mmap(fake, off, n, prot)
			name, content := page, "-"
			if name == "" {
				name = "-"
			}
			if len(fill) > 0 {
				content = hex.EncodeToString(fill[:min(len(fill), n)])
			}
			fmt.Fprintf(w, "A %d %s %s\n", int(errno), name, content)
			if err := w.Flush(); err != nil {
				return rec, fmt.Errorf("answer: %w", err)
			}
			if errno == 0 && page != "" {
				pg := make([]byte, n)
				copy(pg, fill)
				pages[page] = pg
			}
		case strings.HasPrefix(line, "P "):
			var i int
			if _, err := fmt.Sscanf(line, "P %d", &i); err != nil || i < 0 || i >= len(sc.Steps) {
				return rec, fmt.Errorf("bad cqe query %q", line)
			}
			region, off, b, err := sc.Driver.Poke(fake, sc.Steps[i])
			if err != nil {
				return rec, fmt.Errorf("step %d %q: %w", i, sc.Steps[i].Line(), err)
			}
			fmt.Fprintf(w, "A 0 %s %d %s\n", region, off, hex.EncodeToString(b))
			if err := w.Flush(); err != nil {
				return rec, fmt.Errorf("answer: %w", err)
			}
		case strings.HasPrefix(line, "E "):
			var ev event
			raw := []byte(line[2:])
			if err := json.Unmarshal(raw, &ev); err != nil {
				return rec, fmt.Errorf("bad event %q: %w", line, err)
			}
			switch ev.Ev {
			case "start":
				rec.SingleStep = ev.SingleStep != 0
			case "mmap":
				cur.Mmaps = append(cur.Mmaps, Mmap{Off: ev.Off, Len: ev.Len, Prot: ev.Prot, Flags: ev.Flags})
			case "fence":
				cur.Seq = append(cur.Seq, SeqEvent{Fence: ev.Kind})
			case "store":
				b, err := hex.DecodeString(ev.Hex)
				if err != nil {
					return rec, fmt.Errorf("bad store %q: %w", line, err)
				}
				cur.Seq = append(cur.Seq, SeqEvent{Target: ev.Page, Off: int(ev.Off), Width: ev.Width, Bytes: b})
				pg, ok := pages[ev.Page]
				if !ok {
					break // a doorbell record: in Seq and (after the step) in Mem
				}
				cur.Stores = append(cur.Stores, Store{Page: ev.Page, Off: int(ev.Off), Width: ev.Width, Bytes: b})
				if int(ev.Off)+len(b) <= len(pg) {
					pg = append([]byte(nil), pg...) // earlier steps keep their snapshot
					copy(pg[ev.Off:], b)
					pages[ev.Page] = pg
				}
			case "devpage":
				b, err := hex.DecodeString(ev.Hex)
				if err != nil {
					return rec, fmt.Errorf("bad devpage %q: %w", line, err)
				}
				pages[ev.Page] = b
			case "mem":
				b, err := hex.DecodeString(ev.Hex)
				if err != nil {
					return rec, fmt.Errorf("bad mem %q: %w", line, err)
				}
				mem[ev.Name] = b
				cur.Changed = append(cur.Changed, ev.Name)
			case "step":
				if ev.I != len(rec.Steps) || ev.I >= len(sc.Steps) {
					return rec, fmt.Errorf("step %d reported out of order", ev.I)
				}
				if err := json.Unmarshal(raw, &cur.Result); err != nil {
					return rec, fmt.Errorf("bad step result %q: %w", line, err)
				}
				for _, r := range fake.Regions {
					if r.Dead {
						delete(mem, r.Name)
					}
				}
				cur.Stepped = rec.SingleStep
				cur.Step = sc.Steps[ev.I]
				cur.Line = sc.Steps[ev.I].Line()
				cur.Mem = make(map[string][]byte, len(mem))
				for k, v := range mem {
					cur.Mem[k] = normalizeMem(sc.Driver, fake, k, v)
				}
				cur.Pages = make(map[string][]byte, len(pages))
				for k, v := range pages {
					cur.Pages[k] = v
				}
				rec.Steps = append(rec.Steps, cur)
				cur = StepRecord{}
			case "done":
				done = true
			}
		default:
			return rec, fmt.Errorf("unexpected harness output %q", line)
		}
	}
	rec.Regions = fake.Regions
	rec.Cmds = fake.Cmds
	if err := sc2.Err(); err != nil {
		return rec, fmt.Errorf("reading harness: %w", err)
	}
	if !done {
		return rec, fmt.Errorf("harness stopped after %d of %d steps", len(rec.Steps), len(sc.Steps))
	}
	return rec, nil
}

// RunTool runs d's harness with args (a driver's own mode, as mlx5's --ts-to-ns) on
// stdin and returns its stdout.
func RunTool(ctx context.Context, d Driver, stdin []byte, args ...string) ([]byte, error) {
	bin, err := buildVariant(d, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("oracle %s %v: %w (stderr: %s)", d.Library(), args, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
