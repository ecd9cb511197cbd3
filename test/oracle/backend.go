package oracle

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/test/internal/kcmd"
	"golang.org/x/sys/unix"
)

// Backend lets a Go provider run against the same fake kernel answers the harness gave
// the library, in process: it has the method set of a uverbs device-file backend
// (Write/Mmap/Munmap), answers every command with Fake.Answer, patches the fds the
// harness patches (async fd, completion channel fds: real pipes), hands out anonymous
// pages for the device file's mmaps as the Driver answers them, and can observe the same
// regions a Record holds.
//
// Safety: responses are written to the address the request names, and Observe reads
// the CQ/QP buffers and doorbell records at the addresses the CREATE requests named.
// Both must be memory the provider allocated with mmap (never Go heap), which the
// project's rules require anyway.
type Backend struct {
	Fake *Fake

	mu       sync.Mutex
	async    [2]int
	chans    [][2]int
	cqHandle []uint64 // user_handle of each CREATE_CQ, by cq id
	pages    []devPage
	mmaps    []Mmap // since the last Observe
	seenCmds int
	errs     []error

	// The provider's device-visible operations (mmio recorder, -tags mmiorecord).
	recMu  sync.Mutex
	ops    []mmio.Event
	cancel func()
}

type devPage struct {
	name string
	mem  []byte
}

// NewBackend returns a backend answering with a fresh Fake of d.
// With the mmiorecord build tag it also records the provider's barriers, doorbell-record
// and MMIO stores (Observation.Ops); Recording says whether it does.
func NewBackend(d Driver) *Backend {
	b := &Backend{Fake: NewFake(d), async: [2]int{-1, -1}}
	b.cancel = mmio.Subscribe(func(e mmio.Event) {
		b.recMu.Lock()
		b.ops = append(b.ops, e)
		b.recMu.Unlock()
	})
	return b
}

// Recording reports whether Observe returns the provider's store sequence (the test
// binary was built with -tags mmiorecord).
func Recording() bool { return mmio.Recording }

// ptrBytes views n bytes at address a (mmap'd memory of this process).
func ptrBytes(a uint64, n int) []byte {
	if a == 0 || n <= 0 {
		return nil
	}
	// Reinterpret the integer as a pointer: the memory is outside the Go heap.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a))
	return unsafe.Slice((*byte)(p), n)
}

// Write handles one uverbs write(): header | body, as the kernel would see it.
func (b *Backend) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(p) < 8 {
		return 0, syscall.EINVAL
	}
	cmd := binary.LittleEndian.Uint32(p)
	inW := int(binary.LittleEndian.Uint16(p[4:]))
	outW := int(binary.LittleEndian.Uint16(p[6:]))
	body := p[8:]
	out, errno, _ := b.Fake.Answer(cmd, inW, outW, body)
	if errno != 0 {
		return 0, errno
	}
	ex := cmd&kcmd.ExFlag != 0
	num := cmd &^ kcmd.ExFlag
	if !ex {
		switch num {
		case kcmd.CmdGetContext:
			if b.async[0] < 0 {
				if err := unix.Pipe2(b.async[:], unix.O_CLOEXEC); err != nil {
					return 0, fmt.Errorf("oracle: async pipe: %w", err)
				}
			}
			if len(out) >= 4 {
				binary.LittleEndian.PutUint32(out, uint32(b.async[0]))
			}
		case kcmd.CmdCreateCompChannel:
			var fds [2]int
			if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
				return 0, fmt.Errorf("oracle: channel pipe: %w", err)
			}
			b.chans = append(b.chans, fds)
			if len(out) >= 4 {
				binary.LittleEndian.PutUint32(out, uint32(fds[0]))
			}
		case kcmd.CmdCreateCQ:
			if len(body) >= 16 {
				b.cqHandle = append(b.cqHandle, binary.LittleEndian.Uint64(body[8:]))
			}
		}
	} else if num == kcmd.CmdCreateCQ && len(body) >= 24 {
		b.cqHandle = append(b.cqHandle, binary.LittleEndian.Uint64(body[16:])) // after the ex header
	}
	if len(out) > 0 && len(body) >= 8 {
		copy(ptrBytes(binary.LittleEndian.Uint64(body), len(out)), out)
	}
	return len(p), nil
}

// Poke writes what a "cqe" step writes (the driver's Poke, with what this fake learned)
// into the provider's memory, as the harness writes it into the library's.
func (b *Backend) Poke(s Step) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	region, off, data, err := b.Fake.D.Poke(b.Fake, s)
	if err != nil {
		return err
	}
	r := b.Fake.Region(region)
	if r == nil || off+len(data) > r.Len {
		return fmt.Errorf("oracle: cqe of %d bytes at %d outside region %s", len(data), off, region)
	}
	copy(ptrBytes(r.Addr+uint64(off), len(data)), data)
	return nil
}

// Mmap hands out anonymous pages for the uverbs fd's mmaps, filled and named as the
// Driver answers (device pages are remembered for Observe).
func (b *Backend) Mmap(off int64, length, prot int) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mmaps = append(b.mmaps, Mmap{Off: uint64(off), Len: length, Prot: prot, Flags: unix.MAP_SHARED})
	page, fill, errno := b.Fake.D.Mmap(b.Fake, uint64(off), length, prot)
	if errno != 0 {
		return nil, errno
	}
	m, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("oracle: mmap: %w", err)
	}
	copy(m, fill)
	if page != "" {
		b.pages = append(b.pages, devPage{page, m})
	}
	return m, nil
}

// Munmap releases a page Mmap gave.
func (b *Backend) Munmap(m []byte) error {
	b.mu.Lock()
	for i, u := range b.pages {
		if len(u.mem) > 0 && len(m) > 0 && &u.mem[0] == &m[0] {
			b.pages = append(b.pages[:i], b.pages[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	return unix.Munmap(m)
}

// CompEvent queues a completion event for the cq-th CQ created (as the harness's
// event step does): an ib_uverbs_comp_event_desc with that CQ's user_handle, written
// to the last completion channel.
func (b *Backend) CompEvent(cq int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cq >= len(b.cqHandle) || len(b.chans) == 0 {
		return fmt.Errorf("oracle: no cq %d or no channel", cq)
	}
	var d [8]byte
	binary.LittleEndian.PutUint64(d[:], b.cqHandle[cq])
	if _, err := unix.Write(b.chans[len(b.chans)-1][1], d[:]); err != nil {
		return fmt.Errorf("oracle: comp event: %w", err)
	}
	return nil
}

// Observation is what Observe saw since the previous call: the commands (as in
// StepRecord.Cmds), every watched region's content (StepRecord.Mem) and the device
// pages' content (StepRecord.Pages).
type Observation struct {
	Cmds  []Cmd
	Mem   map[string][]byte
	Pages map[string][]byte
	Mmaps []Mmap // of the device file, as StepRecord.Mmaps
	// Ops is the provider's sequence of device-visible operations since the last
	// Observe, in its own terms: stores (Target as in SeqEvent, "?" prefixed when the
	// address is in no known record or device page) and barriers by name (Fence
	// "to_device", "from_device", "wc_start", "flush"). Nil without -tags mmiorecord.
	Ops []SeqEvent
}

// Observe snapshots the regions and device pages and returns the commands since the
// last Observe; call it after each step.
func (b *Backend) Observe() Observation {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := Observation{Mem: map[string][]byte{}, Pages: map[string][]byte{}}
	o.Cmds = append(o.Cmds, b.Fake.Cmds[b.seenCmds:]...)
	o.Mmaps, b.mmaps = b.mmaps, nil
	b.seenCmds = len(b.Fake.Cmds)
	for _, r := range b.Fake.Regions {
		if !r.Dead {
			o.Mem[r.Name] = normalizeMem(b.Fake.D, b.Fake, r.Name, readMem(r.Addr, r.Len))
		}
	}
	for _, u := range b.pages {
		o.Pages[u.name] = append([]byte(nil), u.mem...)
	}
	b.recMu.Lock()
	ops := b.ops
	b.ops = nil
	b.recMu.Unlock()
	if mmio.Recording {
		o.Ops = []SeqEvent{}
	}
	for _, e := range ops {
		o.Ops = append(o.Ops, b.name(e))
	}
	return o
}

// name turns a recorded operation into a SeqEvent: barriers by name, stores by the record
// or device page they hit (b.mu held).
func (b *Backend) name(e mmio.Event) SeqEvent {
	switch e.Op {
	case mmio.OpRecord, mmio.OpStore64, mmio.OpStore32, mmio.OpCopy64:
	default:
		return SeqEvent{Fence: e.Op.String()}
	}
	ev := SeqEvent{Width: e.Len, Bytes: append([]byte(nil), e.Data[:e.Len]...)}
	a := uint64(e.Addr)
	if e.Op == mmio.OpRecord {
		for _, r := range b.Fake.Regions {
			if strings.HasSuffix(r.Name, ".db") && !r.Dead && a >= r.Addr && a < r.Addr+uint64(r.Len) {
				ev.Target, ev.Off = r.Name, int(a-r.Addr)
				return ev
			}
		}
		ev.Target, ev.Off = "?record", int(a&4095)
		return ev
	}
	for _, u := range b.pages {
		base := uint64(uintptr(unsafe.Pointer(&u.mem[0])))
		if a >= base && a < base+uint64(len(u.mem)) {
			ev.Target, ev.Off = u.name, int(a-base)
			return ev
		}
	}
	ev.Target, ev.Off = "?mmio", int(a&4095)
	return ev
}

// StopRecording stops recording the provider's device-visible operations (a test that
// measures the provider's allocations: the recording's own would count).
func (b *Backend) StopRecording() { b.cancel() }

// Close closes the write ends of the pipes the backend created (the read ends were
// handed to the provider's core, which owns and closes them).
func (b *Backend) Close() error {
	b.cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.async[1] >= 0 {
		unix.Close(b.async[1])
	}
	for _, c := range b.chans {
		unix.Close(c[1])
	}
	b.async = [2]int{-1, -1}
	b.chans = nil
	return nil
}

// MapMR maps the buffer of an mr step in this process at the step's fixed address,
// filled as the harness fills it (byte i = i·7 + ID), so that a Go provider registers
// the same addresses and data as the library did. Release it with UnmapMR (unix.Munmap
// only unmaps what unix.Mmap mapped).
func MapMR(s Step) ([]byte, error) {
	if s.Kind != KMR {
		return nil, fmt.Errorf("oracle: MapMR of a %s step", s.Kind)
	}
	want := *(*unsafe.Pointer)(unsafe.Pointer(&s.Addr))
	p, err := unix.MmapPtr(-1, 0, want, uintptr(s.Len), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE)
	if err != nil {
		return nil, fmt.Errorf("oracle: map mr%d at %#x: %w", s.ID, s.Addr, err)
	}
	if p != want {
		unix.MunmapPtr(p, uintptr(s.Len))
		return nil, fmt.Errorf("oracle: map mr%d: got %p, want %#x", s.ID, p, s.Addr)
	}
	b := unsafe.Slice((*byte)(p), s.Len)
	for i := range b {
		b[i] = byte(i*7 + s.ID)
	}
	return b, nil
}

// readMem copies n bytes at address a of this process through /proc/self/mem, so a
// region the provider already unmapped reads as nil instead of crashing the test.
func readMem(a uint64, n int) []byte {
	f, err := os.Open("/proc/self/mem")
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(a)); err != nil {
		return nil
	}
	return b
}

// UnmapMR releases a buffer MapMR mapped.
func UnmapMR(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))); err != nil {
		return fmt.Errorf("oracle: unmap mr: %w", err)
	}
	return nil
}
