package rping

import (
	"bytes"
	"fmt"
	"io"

	"github.com/gorping/gorping/rdmacm"
)

// printer writes rping's stdout lines (ping data, -d debug) and stderr lines.
// Each line is one Write, so concurrent connections never interleave mid-line.
type printer struct {
	stdout, stderr io.Writer
	debug          bool
	line           []byte   // reused for ping-data lines, so printing them allocates nothing
	removal        *removal // the run's, for deviceRemoved; nil outside Run
	// cmErr is the last error CM event cmError printed (sawCMErr: there was one),
	// which the mesh prober turns into a failure reason.
	cmErr    rdmacm.Event
	sawCMErr bool
}

func newPrinter(cfg *Config) printer {
	return printer{
		stdout: cfg.Stdout,
		stderr: cfg.Stderr,
		debug:  cfg.Debug,
		line:   make([]byte, 0, 64+MaxSize),
	}
}

// debugLine prints a fixed -d line. Lines with arguments go through debugf;
// on the per-ping path its callers check o.debug first, so the arguments are
// not boxed (and allocated) when -d is off.
func (o *printer) debugLine(s string) {
	if o.debug {
		io.WriteString(o.stdout, s)
	}
}

func (o *printer) debugf(format string, args ...any) {
	if o.debug {
		fmt.Fprintf(o.stdout, format, args...)
	}
}

func (o *printer) errorf(format string, args ...any) {
	fmt.Fprintf(o.stderr, format, args...)
}

// data prints prefix, the C string in b, and a newline, as rping's
// printf("%s%s\n") does, without reading past b.
func (o *printer) data(prefix string, b []byte) {
	o.line = append(o.line[:0], prefix...)
	o.line = append(o.line, cstring(b)...)
	o.line = append(o.line, '\n')
	o.stdout.Write(o.line)
}

// cstring is b up to (not including) its first NUL, or all of b if it has none.
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// hint prints a hint line (package explain's); "" prints nothing.
func (o *printer) hint(s string) {
	if s != "" {
		o.errorf("%s\n", s)
	}
}
