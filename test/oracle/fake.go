package oracle

import (
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"

	"github.com/gorping/gorping/test/internal/kcmd"
)

var le = binary.LittleEndian

// Driver is one kernel driver's part of the oracle: how the library finds its device,
// and the driver's side of the fake kernel's answers. A value carries the parameters of
// one run (the answers are deterministic in them, so the library and the Go provider
// see the same).
type Driver interface {
	// Library is the provider's name (/etc/libibverbs.d/<Library>.driver).
	Library() string
	// BuildArgs are gcc arguments the harness needs for this driver (-lmlx5
	// -DORACLE_MLX5 for the mlx5dv steps).
	BuildArgs() []string
	// Sysfs is the fake sysfs tree the library discovers the device in: paths under
	// the root (class/infiniband_verbs/uverbs0/ibdev, ...) and their content.
	Sysfs() map[string]string
	// PageSize is the kernel page size the library sees (0: 4096).
	PageSize() int
	// Answer answers command c (after the core checks) and returns the whole response,
	// core then driver; it names run-dependent fields (f.Sym) and the memory it learns
	// of (f.AddRegion).
	Answer(f *Fake, c *Cmd, k kcmd.Command) ([]byte, syscall.Errno)
	// Mmap answers an mmap of the device file: the name of the device page it is ("" for
	// plain memory, whose stores are not the device's), and what the page holds.
	Mmap(f *Fake, off uint64, length, prot int) (page string, fill []byte, errno syscall.Errno)
	// Poke places what a "cqe" step writes: into which region, where, which bytes
	// (completed with what the fake learned, e.g. a QP's handle).
	Poke(f *Fake, s Step) (region string, off int, b []byte, err error)
	// CheckOrder checks the provider's own sequence of a step (Observation.Ops) against
	// the driver's doorbell discipline: the barriers x86 does not show, and that every
	// doorbell follows what it announces.
	CheckOrder(line string, ops []SeqEvent) []string
}

// MemNormalizer is a Driver whose regions hold values that differ between runs (bnxt_re's
// CQEs carry the QP handle the library or the provider chose): NormalizeMem returns the
// content of region with them replaced by what they stand for, on both sides alike.
type MemNormalizer interface {
	NormalizeMem(f *Fake, region string, b []byte) []byte
}

func normalizeMem(d Driver, f *Fake, region string, b []byte) []byte {
	if n, ok := d.(MemNormalizer); ok && b != nil {
		return n.NormalizeMem(f, region, append([]byte(nil), b...))
	}
	return b
}

// A Region is memory the fake learned of from a request: a queue buffer ("cq0", "qp0",
// "qp0.sq") or a doorbell record ("cq0.db": a name ending ".db" is a record, whose
// stores are part of the device-visible sequence).
type Region struct {
	Name string
	Addr uint64
	Len  int
	Dead bool // its object was destroyed (DESTROY_CQ/QP, DEREG_MR): no longer watched
}

// Sym names a pointer-like field of a request that differs between runs and was
// zeroed in Cmd.Core/Cmd.Driver: Part "core" or "driver", byte offset, and a
// symbolic value ("response", "user_handle", "fd", "cq0+0x0", "dbrec0+0x40").
type Sym struct {
	Part string `json:"part"`
	Off  int    `json:"off"`
	Name string `json:"name"`
}

// Cmd is one uverbs write() command as the fake saw it, normalised.
type Cmd struct {
	Num      uint32 `json:"num"` // command number without the extended flag
	Ex       bool   `json:"ex"`
	InWords  int    `json:"in_words"`  // header in_words as sent (legacy: 4-byte units incl. header; ex: 8-byte units of the core)
	OutWords int    `json:"out_words"` // header out_words
	ProvIn   int    `json:"prov_in"`   // ex only: provider_in_words
	ProvOut  int    `json:"prov_out"`  // ex only: provider_out_words
	Core     []byte `json:"core"`      // core request, Syms zeroed
	Driver   []byte `json:"driver"`    // driver request, Syms zeroed
	Syms     []Sym  `json:"syms"`
	Errno    int    `json:"errno"`    // 0 or the errno the fake answered
	Out      []byte `json:"out"`      // full response written (core then driver), fds as the Go fake gave them (0)
	CoreOut  int    `json:"core_out"` // bytes of Out that are the core response
}

// Fake is the oracle's fake kernel: the harness forwards the library's commands to it,
// and a Go provider under test is answered by the same Fake (Backend). It splits each
// command as the kernel does (test/internal/kcmd, the decoder of the tests' fake kernel),
// records it, and lets the Driver answer.
type Fake struct {
	D       Driver
	Cmds    []Cmd
	Regions []Region
	dbPages []uint64
	handles uint32
	owned   map[uint32][]string // handle → names of the regions of that object
	counts  map[string]int
	vals    map[string]uint64
}

// Set keeps a value the driver learned from a request (bnxt_re: "qp0.handle", the
// qp_handle its CQEs carry); Get returns it (ok false: never set).
func (f *Fake) Set(name string, v uint64) {
	if f.vals == nil {
		f.vals = map[string]uint64{}
	}
	f.vals[name] = v
}

func (f *Fake) Get(name string) (uint64, bool) {
	v, ok := f.vals[name]
	return v, ok
}

// NewFake returns a fake kernel answering with d.
func NewFake(d Driver) *Fake { return &Fake{D: d} }

// Answer handles one write() command: cmd is the header's command word (with the
// extended flag if set), in the bytes after the 8-byte header. It returns the response
// bytes (at most what the command has room for), or an errno. New watched regions are
// appended to f.Regions; the normalised command to f.Cmds.
func (f *Fake) Answer(cmd uint32, inWords, outWords int, in []byte) (out []byte, errno syscall.Errno, newRegions []Region) {
	p := le.AppendUint32(nil, cmd)
	p = le.AppendUint16(p, uint16(inWords))
	p = le.AppendUint16(p, uint16(outWords))
	p = append(p, in...)
	k, err := kcmd.Decode(p)
	c := Cmd{Num: cmd &^ kcmd.ExFlag, Ex: cmd&kcmd.ExFlag != 0, InWords: inWords, OutWords: outWords, ProvIn: k.ProvIn, ProvOut: k.ProvOut}
	before := len(f.Regions)
	if err != nil {
		// Not split: recorded whole, refused as the kernel would.
		c.Core = append([]byte(nil), in...)
		errno = syscall.EOPNOTSUPP
		if e, ok := err.(syscall.Errno); ok {
			errno = e
		}
	} else {
		c.Core = append([]byte(nil), k.Core...)
		c.Driver = append([]byte(nil), k.Driver...)
		if !c.Ex && k.Resp != 0 {
			f.Sym(&c, "core", 0, "response")
		}
		out, errno = f.D.Answer(f, &c, k)
		if n := k.CoreOut + k.DriverOut; len(out) > n {
			out = out[:n]
		}
		c.CoreOut = min(k.CoreOut, len(out))
	}
	if errno != 0 {
		out = nil
	}
	c.Errno = int(errno)
	c.Out = append([]byte(nil), out...)
	f.Cmds = append(f.Cmds, c)
	return out, errno, f.Regions[before:]
}

// Count returns how many of kind the fake has counted so far, and counts one more (the
// drivers number their objects by kind: "cq", "qp", "mr", "pd").
func (f *Fake) Count(kind string) int {
	if f.counts == nil {
		f.counts = map[string]int{}
	}
	n := f.counts[kind]
	f.counts[kind]++
	return n
}

// Sym zeroes the 8 bytes at off of part ("core" or "driver") of c and names them.
func (f *Fake) Sym(c *Cmd, part string, off int, name string) {
	b := c.Core
	if part == "driver" {
		b = c.Driver
	}
	if off+8 <= len(b) {
		clear(b[off : off+8])
	}
	c.Syms = append(c.Syms, Sym{Part: part, Off: off, Name: name})
}

// Addr names an address inside a watched buffer ("cq0+0x40") or a doorbell page
// ("dbrec<i>+0x40", pages numbered in order of first appearance).
func (f *Fake) Addr(a uint64) string {
	for _, r := range f.Regions {
		// A destroyed object's memory may be reused by the library's allocator: name an
		// address after the live region holding it.
		if !r.Dead && !strings.HasSuffix(r.Name, ".db") && a >= r.Addr && a < r.Addr+uint64(r.Len) {
			return fmt.Sprintf("%s+%#x", r.Name, a-r.Addr)
		}
	}
	page := a &^ 4095
	for i, p := range f.dbPages {
		if p == page {
			return fmt.Sprintf("dbrec%d+%#x", i, a-page)
		}
	}
	f.dbPages = append(f.dbPages, page)
	return fmt.Sprintf("dbrec%d+%#x", len(f.dbPages)-1, a-page)
}

// AddRegion watches n bytes at a as name.
func (f *Fake) AddRegion(name string, a uint64, n int) {
	f.Regions = append(f.Regions, Region{Name: name, Addr: a, Len: n})
}

// Region is the live region named name (nil: none).
func (f *Fake) Region(name string) *Region {
	for i := range f.Regions {
		if f.Regions[i].Name == name && !f.Regions[i].Dead {
			return &f.Regions[i]
		}
	}
	return nil
}

// Handle hands out the next object handle; the regions named belong to it (Kill).
func (f *Fake) Handle(regions ...string) uint32 {
	f.handles++
	if f.owned == nil {
		f.owned = map[uint32][]string{}
	}
	f.owned[f.handles] = regions
	return f.handles
}

// Kill marks the regions of the object with handle h dead.
func (f *Fake) Kill(h uint32) {
	for _, n := range f.owned[h] {
		for i := range f.Regions {
			if f.Regions[i].Name == n {
				f.Regions[i].Dead = true
			}
		}
	}
}
