package mlx5oracle

import (
	"fmt"
	"strings"
)

// CheckOrder checks the barriers x86 does not show (ToDevice is empty there, but DSB ST on
// arm64) and the doorbell discipline on the provider's own sequence, as libmlx5's source
// orders them (verbs.md §6.6-6.9): a QP's doorbell record is written only after ToDevice
// (its WQEs are visible first); a run of UAR stores follows WCStart, comes after the
// doorbell record it announces, and is followed by Flush before anything else is stored;
// no store hits an address outside the known records and UAR pages.
func CheckOrder(line string, ops []SeqEvent) []string {
	var d []string
	barrier := map[string]bool{} // barriers since the last store
	inUAR := false
	for i, e := range ops {
		if e.Fence != "" {
			if inUAR && e.Fence == "flush" {
				inUAR = false
			}
			barrier[e.Fence] = true
			continue
		}
		switch {
		case strings.HasPrefix(e.Target, "?"):
			d = append(d, fmt.Sprintf("%q: op %d: store %v outside every doorbell record and UAR page", line, i, e))
		case strings.HasPrefix(e.Target, "qp") && strings.HasSuffix(e.Target, ".db"):
			if !barrier["to_device"] {
				d = append(d, fmt.Sprintf("%q: op %d: doorbell record %v written without ToDevice before it", line, i, e))
			}
			if inUAR {
				d = append(d, fmt.Sprintf("%q: op %d: doorbell record %v written between UAR stores and their Flush", line, i, e))
			}
		case strings.HasPrefix(e.Target, "uar"):
			if !inUAR && !barrier["wc_start"] {
				d = append(d, fmt.Sprintf("%q: op %d: UAR store %v without WCStart after the doorbell record", line, i, e))
			}
			if !inUAR && !recordBefore(ops[:i]) {
				d = append(d, fmt.Sprintf("%q: op %d: UAR store %v rings without a doorbell record written before it", line, i, e))
			}
			inUAR = true
		default:
			if inUAR {
				d = append(d, fmt.Sprintf("%q: op %d: store %v between UAR stores and their Flush", line, i, e))
			}
		}
		clear(barrier)
	}
	if inUAR {
		d = append(d, fmt.Sprintf("%q: UAR stores not followed by Flush", line))
	}
	return d
}

// recordBefore reports whether the last store before a run of UAR stores was a doorbell
// record (the ring announces what the record says).
func recordBefore(ops []SeqEvent) bool {
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Fence == "" {
			return strings.HasSuffix(ops[i].Target, ".db")
		}
	}
	return false
}
