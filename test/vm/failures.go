package vm

import "strings"

// failureLog keeps the console lines that say what failed: each "--- FAIL"
// line with the indented log lines go test prints under it, a panic with the
// lines after it, and test binaries that ended non-zero. It is bounded so a
// run that fails everywhere still gives a readable summary.
type failureLog struct {
	marker string   // the console marker prefix ("@@gr-<nonce> ")
	lines  []string // what was kept, in console order
	follow int      // lines still to keep after the last failure line
	full   bool
}

const (
	failureMax    = 16 // lines kept per guest: a CI log shows only its tail
	failureFollow = 4  // lines kept under one "--- FAIL" or panic
)

func (f *failureLog) add(line string) {
	trimmed := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(trimmed, "--- FAIL:"):
		f.keep(line, failureFollow)
	case strings.HasPrefix(trimmed, "panic:"), strings.HasPrefix(trimmed, "fatal error:"),
		strings.HasPrefix(trimmed, "FAIL\t"), strings.HasPrefix(trimmed, "FAIL "):
		f.keep(line, failureFollow)
	case f.marker != "" && strings.HasPrefix(trimmed, f.marker+"test-end "):
		// "test-end <name> <status>": keep the binaries that failed.
		if fields := strings.Fields(strings.TrimPrefix(trimmed, f.marker)); len(fields) == 3 && fields[2] != "0" {
			f.keep("test binary "+fields[1]+" exited "+fields[2], 0)
		}
		f.follow = 0
	case strings.HasPrefix(trimmed, "--- PASS:"), strings.HasPrefix(trimmed, "--- SKIP:"), strings.HasPrefix(trimmed, "=== "):
		// A parent's "--- FAIL" is followed by its subtests' results; only
		// log lines belong to a failure.
		f.follow = 0
	case f.follow > 0 && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") || strings.HasPrefix(trimmed, "goroutine ")):
		f.keep(line, f.follow-1)
	default:
		f.follow = 0
	}
}

func (f *failureLog) keep(line string, follow int) {
	f.follow = follow
	if len(f.lines) >= failureMax {
		if !f.full {
			f.lines = append(f.lines, "(more failure lines in the log above)")
			f.full = true
		}
		return
	}
	f.lines = append(f.lines, line)
}
