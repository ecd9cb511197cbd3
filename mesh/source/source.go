// Package source is where the mesh agent's lists of hosts come from, targets and peer
// agents alike: a file re-read when it changes (File), a DNS name re-resolved (DNS).
// Each keeps its last good list when a read or a lookup fails, says so once per change
// (a log line and a counter) and hands its list on; the caller merges the lists.
package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorping/gorping/mesh/target"
)

// MaxFileBytes bounds a list file read into memory.
const MaxFileBytes = 8 << 20

// Kind names what a source lists, in its log lines: "target" and "targets", or
// "agents" and "agents".
type Kind struct{ One, Many string }

// The kinds of lists.
var (
	Targets = Kind{One: "target", Many: "targets"}
	Agents  = Kind{One: "agents", Many: "agents"}
)

// File is a list file: one host[:port] per line (target.ParseFile).
type File struct {
	Path        string
	DefaultPort uint16
	Kind        Kind
	Log         *slog.Logger
	// Errors counts the problems by source (Source) and reason (read: a read failed,
	// once per change of the error and when forced).
	Errors   *prometheus.CounterVec
	Source   string
	BadLines prometheus.Gauge // the current file's lines that do not parse

	data   []byte
	loaded bool
	err    string // the last read error, "" after a good read
	list   []target.Target
}

// List is the file's last good list.
func (f *File) List() []target.Target { return f.list }

// Load reads the file and reports whether its list may have changed; force (SIGHUP)
// reports a change and logs a read error again even when nothing changed. A file that
// cannot be read keeps the list it last gave (a log line and Errors, once per change
// of the error). Its bad lines are logged once per change of the file and counted by
// BadLines.
func (f *File) Load(force bool) bool {
	if f.Path == "" {
		return false
	}
	data, err := ReadRegularFile(f.Path, MaxFileBytes)
	if err != nil {
		if msg := err.Error(); msg != f.err || force {
			f.err = msg
			f.Log.Error(fmt.Sprintf("cannot read the %s file; keeping its last %s", f.Kind.One, f.Kind.Many), "file", f.Path, "err", err)
			f.Errors.WithLabelValues(f.Source, "read").Inc()
		}
		f.data, f.loaded = nil, false
		return false
	}
	f.err = ""
	if f.loaded && string(data) == string(f.data) {
		return force // unchanged: nothing to log again
	}
	f.data, f.loaded = data, true
	ts, errs := target.ParseFile(data, f.DefaultPort)
	const each = 10
	for i, e := range errs {
		if i == each {
			f.Log.Warn(fmt.Sprintf("more bad lines in the %s file, not logged", f.Kind.One), "file", f.Path, "count", len(errs)-each)
			break
		}
		f.Log.Warn(fmt.Sprintf("bad line in the %s file", f.Kind.One), "file", f.Path, "line", e.Line, "err", e.Err)
	}
	f.BadLines.Set(float64(len(errs)))
	f.Log.Info(f.Kind.One+" file loaded", "file", f.Path, f.Kind.Many, len(ts), "bad_lines", len(errs))
	f.list = ts
	return true
}

// DNS is a name whose addresses (A and AAAA) are the list, on one port.
type DNS struct {
	Name     string
	Port     uint16
	Option   string // the option that gave it, for the log: --targets.dns
	Kind     Kind
	Resolver target.Resolver
	Log      *slog.Logger
	// Errors counts the problems by source (Source) and reason (resolve: a lookup failed).
	Errors *prometheus.CounterVec
	Source string

	list []target.Target
}

// List is the name's last good list.
func (d *DNS) List() []target.Target { return d.list }

// Timeout bounds a lookup.
const Timeout = 10 * time.Second

// Refresh resolves the name. A failure keeps the last answer (a log line and Errors),
// so a DNS hiccup does not drop every host.
func (d *DNS) Refresh(ctx context.Context) {
	if d.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	ts, err := target.ResolveDNS(ctx, d.Resolver, d.Name, d.Port)
	if err != nil {
		d.Log.Warn(fmt.Sprintf("cannot resolve %s; keeping its last %s", d.Option, d.Kind.Many), "name", d.Name, "err", err)
		d.Errors.WithLabelValues(d.Source, "resolve").Inc()
		return
	}
	d.list = ts
}

// ReadRegularFile reads path if it is a regular file (or a symlink to one, as a
// ConfigMap's is) of at most limit bytes. It opens without blocking, so a FIFO in its
// place is refused at once instead of waiting for a writer, and a device (/dev/zero) is
// never read.
func ReadRegularFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fileKind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d KiB (%d bytes)", path, limit>>10, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d KiB (it grew while read)", path, limit>>10)
	}
	return data, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.Type().String()
}
