package uverbs

import (
	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/uverbs/driver"
	"golang.org/x/sys/unix"
)

// Option configures Open, OpenShared and OpenBackend. Everything a context depends on
// beyond its device comes in this way; uverbs has no process-wide settings to change.
type Option func(*options)

type options struct {
	tracer   *trace.Tracer
	backend  driver.Backend
	provider driver.Provider
	// memlock reads RLIMIT_MEMLOCK for RegMR's explanation of ENOMEM/EPERM.
	memlock func() (unix.Rlimit, error)
	// write and ioctl replace the device file's system calls (in-package tests: a fake
	// kernel on a real fd).
	write func(fd int, p []byte) (int, error)
	ioctl func(fd int, req uint, arg uintptr) error
}

// WithTracer makes every command, mmap, QP transition and data-path step of the context
// a trace record (--trace). A nil tracer traces nothing and costs nothing.
func WithTracer(t *trace.Tracer) Option { return func(o *options) { o.tracer = t } }

// withBackend opens the context on b instead of dev's device node (OpenBackend: device
// models, fake kernels).
func withBackend(b driver.Backend) Option { return func(o *options) { o.backend = b } }

// WithProvider makes p the context's provider, whatever is registered for dev's driver
// (a provider's own tests, the conformance suite).
func WithProvider(p driver.Provider) Option { return func(o *options) { o.provider = p } }

// withMemlock makes f the RLIMIT_MEMLOCK reader (tests).
func withMemlock(f func() (unix.Rlimit, error)) Option { return func(o *options) { o.memlock = f } }

func applyOptions(opts []Option) options {
	o := options{memlock: getrlimitMemlock}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// getrlimitMemlock reads RLIMIT_MEMLOCK.
func getrlimitMemlock() (unix.Rlimit, error) {
	var r unix.Rlimit
	err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r)
	return r, err
}
