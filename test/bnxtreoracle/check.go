package bnxtreoracle

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/gorping/gorping/test/oracle"
)

type oracleLE struct{}

func (oracleLE) put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func (oracleLE) put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }
func (oracleLE) get32(b []byte, off int) uint32    { return binary.LittleEndian.Uint32(b[off:]) }
func (oracleLE) get64(b []byte, off int) uint64    { return binary.LittleEndian.Uint64(b[off:]) }

// CheckOrder checks bnxt_re's doorbell discipline on the provider's own sequence (the
// barriers x86 does not show included), as libbnxt_re's bnxt_re_ring_db orders it: every
// doorbell is one 8-byte store to the doorbell page, after WCStart (the queue entries it
// announces are visible first: DSB ST on arm64), and followed by Flush before anything
// else is stored; nothing is stored outside the doorbell page.
func (Driver) CheckOrder(line string, ops []oracle.SeqEvent) []string {
	var d []string
	wcStart, open := false, false
	for i, e := range ops {
		if e.Fence != "" {
			switch e.Fence {
			case "wc_start":
				wcStart = true
			case "flush":
				open = false
			}
			continue
		}
		switch {
		case e.Target != "db" || strings.HasPrefix(e.Target, "?"):
			d = append(d, fmt.Sprintf("%q: op %d: store %v outside the doorbell page", line, i, e))
		case e.Width != 8:
			d = append(d, fmt.Sprintf("%q: op %d: doorbell %v is %d bytes wide, the device takes 8", line, i, e, e.Width))
		case open:
			d = append(d, fmt.Sprintf("%q: op %d: doorbell %v before the previous one's Flush", line, i, e))
		case !wcStart:
			d = append(d, fmt.Sprintf("%q: op %d: doorbell %v without WCStart before it", line, i, e))
		}
		wcStart, open = false, true
	}
	if open {
		d = append(d, fmt.Sprintf("%q: doorbell not followed by Flush", line))
	}
	return d
}
