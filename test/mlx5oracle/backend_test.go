package mlx5oracle

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestOracleHarnessBackendReplay replays the commands libmlx5 sent in a scenario
// through Backend.Write (with this process's own buffers in the address fields) and
// checks that the in-process path normalises them exactly as the harness path did, so
// a Go provider compared through Backend is held to the same bytes.
func TestOracleHarnessBackendReplay(t *testing.T) {
	for _, name := range []string{"context", "cq-depths", "qp-caps", "arm"} {
		t.Run(name, func(t *testing.T) { replay(t, name) })
	}
}

func replay(t *testing.T, name string) {
	sc, rec := scenario(t, name)
	be := NewBackend(sc.Params)
	defer be.Close()
	mem, err := unix.Mmap(-1, 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	resp, bufs, dbs := base, base+4096, base+3<<20
	next := bufs
	for si, st := range rec.Steps {
		if st.Step.Kind == KMR {
			b, err := MapMR(st.Step)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := UnmapMR(b); err != nil {
					t.Error(err)
				}
			}()
		}
		for _, c := range st.Cmds {
			core := append([]byte(nil), c.Core...)
			drv := append([]byte(nil), c.Driver...)
			for _, y := range c.Syms {
				b := core
				if y.Part == "driver" {
					b = drv
				}
				switch {
				case y.Name == "response":
					binary.LittleEndian.PutUint64(b[y.Off:], resp)
				case y.Name == "fd":
					binary.LittleEndian.PutUint32(b[y.Off:], 0)
				case y.Name == "user_handle":
					binary.LittleEndian.PutUint64(b[y.Off:], 0x1000+uint64(si))
				case y.Off == 0 && y.Part == "driver": // buffer
					binary.LittleEndian.PutUint64(b[y.Off:], next)
					next += 64 << 10
				case y.Off == 8 && y.Part == "driver": // doorbell record
					var off uint64
					if _, err := fmtSscanf(y.Name, &off); err != nil {
						t.Fatalf("doorbell sym %q: %v", y.Name, err)
					}
					binary.LittleEndian.PutUint64(b[y.Off:], dbs+off)
				}
			}
			cmd := c.Num
			var body []byte
			if c.Ex {
				cmd |= exFlag
				hdr := make([]byte, 16)
				binary.LittleEndian.PutUint64(hdr, resp)
				binary.LittleEndian.PutUint16(hdr[8:], uint16(c.ProvIn))
				binary.LittleEndian.PutUint16(hdr[10:], uint16(c.ProvOut))
				body = append(hdr, core...)
			} else {
				body = core
			}
			body = append(body, drv...)
			p := make([]byte, 8, 8+len(body))
			binary.LittleEndian.PutUint32(p, cmd)
			binary.LittleEndian.PutUint16(p[4:], uint16(c.InWords))
			binary.LittleEndian.PutUint16(p[6:], uint16(c.OutWords))
			p = append(p, body...)
			_, werr := be.Write(p)
			if (werr != nil) != (c.Errno != 0) {
				t.Fatalf("step %d command %d: Write error %v, harness errno %d", si, c.Num, werr, c.Errno)
			}
		}
		o := be.Observe()
		// Registered buffers must read the same (MapMR fills like the harness); CQ/QP
		// buffers are this test's own zeroed memory, not a provider's.
		mrs := map[string][]byte{}
		for k, v := range st.Mem {
			if strings.HasPrefix(k, "mr") {
				mrs[k] = v
			}
		}
		omrs := map[string][]byte{}
		for k, v := range o.Mem {
			if strings.HasPrefix(k, "mr") {
				omrs[k] = v
			}
		}
		for _, line := range DiffStep(StepRecord{Line: st.Line, Cmds: st.Cmds, Mem: mrs}, Observation{Cmds: o.Cmds, Mem: omrs}) {
			t.Error(line)
		}
	}
	if len(be.Fake.Regions) != len(rec.Regions) {
		t.Errorf("%d regions, harness run learned %d", len(be.Fake.Regions), len(rec.Regions))
	}
}

// fmtSscanf reads the offset of a "dbrec<page>+0x<hex>" name.
func fmtSscanf(name string, off *uint64) (int, error) {
	_, o, ok := strings.Cut(name, "+")
	if !ok {
		return 0, fmt.Errorf("no offset in %q", name)
	}
	v, err := strconv.ParseUint(o, 0, 64)
	*off = v
	return 1, err
}
