package rping

import (
	"context"
	"net/netip"
	"time"

	"github.com/gorping/gorping/rdmacm"
	"github.com/gorping/gorping/rping/explain"
	"github.com/gorping/gorping/uverbs"
)

// cmID is what the connection glue uses of an rdma_cm ID: *rdmacm.ID, or in host tests
// a fake that connects two IDs of the process over a device model (fakecm_test.go).
type cmID interface {
	Bind(addr netip.AddrPort) error
	Listen(backlog int) error
	ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error
	ResolveRoute(timeout time.Duration) error
	Query() (rdmacm.AddrInfo, error)
	Device() (uverbs.Device, error)
	AttachQP(qp *uverbs.QP, ib bool) error
	InitQPAttr(state uverbs.QPState) (*uverbs.QPAttr, uverbs.QPAttrMask, error)
	Connect(p rdmacm.ConnParam) error
	Accept(p rdmacm.ConnParam) error
	Establish() error
	Reject() error
	Disconnect() error
	Destroy() error
	Event(ctx context.Context) (rdmacm.Event, error)
}

// cmChannel is what a run uses of its rdma_cm event channel: *rdmacm.Channel
// (rdmaChannel), or the fake CM of the host tests.
type cmChannel interface {
	CreateID() (cmID, error)
	// Removed is closed once the channel saw a device removal, before the removal's
	// events reach the IDs (rdmacm.Channel.Removed).
	Removed() <-chan struct{}
	Close() error // destroys every ID left
}

// rdmaChannel is the product's cmChannel.
type rdmaChannel struct{ *rdmacm.Channel }

func (c rdmaChannel) CreateID() (cmID, error) {
	id, err := c.Channel.CreateID()
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return id, nil
}

// cmRun is a run's event channel with its removal watch: a device removal ends the
// run's context (cause errDeviceRemoved) and prints rping's line once, whoever is or is
// not reading the events of the IDs it hits, as rping's CM thread exits. Run and the
// prober each hold one.
type cmRun struct {
	cm      cmChannel
	out     *printer
	ctx     context.Context // the run's; ends on a removal
	cancel  context.CancelCauseFunc
	watched chan struct{}
}

// openCM is rping's first step after option parsing: count the devices (librdmacm
// refuses the event channel, ENODEV, when there is none), open the event channel and
// watch it for a removal, which ends ctx's child, the run's context. On failure it has
// printed rping's lines and returns nil and the exit status.
func openCM(ctx context.Context, cfg *Config, out *printer) (*cmRun, int) {
	devs, err := cfg.host.Devices()
	if err != nil {
		perror(out.stderr, "failed to create RDMA CM event channel", err)
		return nil, statusOf(errnoOf(err))
	}
	if len(devs) == 0 {
		out.errorf("No RDMA devices were detected\n")
		return nil, exitNoDevice
	}
	cm, err := cfg.openCM()
	if err != nil {
		perror(out.stderr, "failed to create RDMA CM event channel", err)
		out.hint(explain.CMOpen(err))
		return nil, statusOf(errnoOf(err))
	}
	r := &cmRun{cm: cm, out: out, watched: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	out.removal = &removal{stderr: out.stderr, cancel: r.cancel, gone: cm.Removed()}
	go func() {
		defer close(r.watched)
		select {
		case <-cm.Removed():
			out.deviceRemoved()
		case <-r.ctx.Done():
		}
	}()
	return r, 0
}

// close closes the event channel (destroying every ID left), reports a removal seen
// during the teardown, ends the run's context with cause and the watch, and returns st,
// or 255 if a removal ended the run.
func (r *cmRun) close(cause error, st int) int {
	r.cm.Close()
	select {
	case <-r.cm.Removed():
		r.out.deviceRemoved()
	default:
	}
	r.cancel(cause)
	<-r.watched
	if removed(r.ctx) {
		return exitFailure
	}
	return st
}
