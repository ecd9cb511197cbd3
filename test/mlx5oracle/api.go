package mlx5oracle

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/mmio"
	"github.com/gorping/gorping/test/oracle"
)

// The oracle's types, under the names the mlx5 tests have always used (test/oracle is
// the one harness; this package is its mlx5 part).
type (
	Step        = oracle.Step
	SGE         = oracle.SGE
	SendWR      = oracle.SendWR
	RecvWR      = oracle.RecvWR
	Caps        = oracle.Caps
	Record      = oracle.Record
	StepRecord  = oracle.StepRecord
	Result      = oracle.Result
	WC          = oracle.WC
	Cmd         = oracle.Cmd
	Sym         = oracle.Sym
	Region      = oracle.Region
	Store       = oracle.Store
	SeqEvent    = oracle.SeqEvent
	Mmap        = oracle.Mmap
	Observation = oracle.Observation
	Backend     = oracle.Backend
	Fake        = oracle.Fake
	Options     = oracle.Options
)

// The step kinds and verbs constants of the oracle.
const (
	KOpen          = oracle.KOpen
	KQueryPort     = oracle.KQueryPort
	KPD            = oracle.KPD
	KMR            = oracle.KMR
	KChannel       = oracle.KChannel
	KCQ            = oracle.KCQ
	KQP            = oracle.KQP
	KRTS           = oracle.KRTS
	KRecv          = oracle.KRecv
	KSend          = oracle.KSend
	KCQE           = oracle.KCQE
	KPoll          = oracle.KPoll
	KArm           = oracle.KArm
	KEvent         = oracle.KEvent
	KDestroyQP     = oracle.KDestroyQP
	KDestroyCQ     = oracle.KDestroyCQ
	KDereg         = oracle.KDereg
	KDeallocPD     = oracle.KDeallocPD
	KQueryDeviceEx = oracle.KQueryDeviceEx
	KCQEx          = oracle.KCQEx
	KPollTS        = oracle.KPollTS

	OpRDMAWrite    = oracle.OpRDMAWrite
	OpRDMAWriteImm = oracle.OpRDMAWriteImm
	OpSend         = oracle.OpSend
	OpSendImm      = oracle.OpSendImm
	OpRDMARead     = oracle.OpRDMARead

	FlagFence     = oracle.FlagFence
	FlagSignaled  = oracle.FlagSignaled
	FlagSolicited = oracle.FlagSolicited
	FlagInline    = oracle.FlagInline

	AccessLocalWrite  = oracle.AccessLocalWrite
	AccessRemoteWrite = oracle.AccessRemoteWrite
	AccessRemoteRead  = oracle.AccessRemoteRead
)

// ErrUnavailable is the oracle's: it cannot run on this machine.
var ErrUnavailable = oracle.ErrUnavailable

// Scenario is a named sequence of steps run against the fake kernel with Params.
type Scenario struct {
	Name   string
	Params Params
	Steps  []Step
}

// Oracle is sc as the oracle runs it: with the mlx5 Driver of its Params.
func (sc Scenario) Oracle() oracle.Scenario {
	return oracle.Scenario{Name: sc.Name, Driver: Driver{sc.Params}, Steps: sc.Steps}
}

// Script is the harness input for sc (without the trailing "end").
func (sc Scenario) Script() string { return sc.Oracle().Script() }

// Run builds the harness if needed and runs sc against a fresh Fake with sc.Params.
func Run(ctx context.Context, sc Scenario) (*Record, error) { return oracle.Run(ctx, sc.Oracle()) }

// RunWith is Run with options.
func RunWith(ctx context.Context, sc Scenario, o Options) (*Record, error) {
	return oracle.RunWith(ctx, sc.Oracle(), o)
}

// MustRun runs sc and fails t on any error; it fails under CI=true when the oracle
// cannot run and skips loudly otherwise.
func MustRun(t testing.TB, sc Scenario) *Record { t.Helper(); return oracle.MustRun(t, sc.Oracle()) }

// MustRunWith is MustRun with options.
func MustRunWith(t testing.TB, sc Scenario, o Options) *Record {
	t.Helper()
	return oracle.MustRunWith(t, sc.Oracle(), o)
}

// Build compiles the mlx5 harness.
func Build() (string, error) { return oracle.Build(Driver{DefaultParams()}) }

// NewFake returns a fake kernel answering as mlx5_ib with p.
func NewFake(p Params) *Fake { return oracle.NewFake(Driver{p}) }

// NewBackend returns a backend answering a Go provider with a fresh Fake of p.
func NewBackend(p Params) *Backend { return oracle.NewBackend(Driver{p}) }

// Recording reports whether Observe returns the provider's store sequence (the test
// binary was built with -tags mmiorecord).
func Recording() bool { return mmio.Recording }

// MapMR maps the buffer of an mr step at its fixed address, filled as the harness fills
// it; UnmapMR releases it.
func MapMR(s Step) ([]byte, error) { return oracle.MapMR(s) }
func UnmapMR(b []byte) error       { return oracle.UnmapMR(b) }

// DiffStep lists how a provider's observation of one step differs from libmlx5's
// record of it (oracle.DiffStep with mlx5's CheckOrder).
func DiffStep(want StepRecord, got Observation) []string {
	return oracle.DiffStep(Driver{}, want, got)
}

// DiffSeq, X86View, ListString and Traced are the oracle's.
func DiffSeq(line string, want, got []SeqEvent) []string { return oracle.DiffSeq(line, want, got) }
func X86View(ops []SeqEvent) []SeqEvent                  { return oracle.X86View(ops) }
func ListString(seq []SeqEvent) string                   { return oracle.ListString(seq) }
func Traced(kind string) bool                            { return oracle.Traced(kind) }

// LibView is libmlx5's sequence as it is compared (oracle.LibView; the UAR pages are the
// device pages).
func LibView(seq []SeqEvent) []SeqEvent {
	pages := map[string][]byte{}
	for _, e := range seq {
		if strings.HasPrefix(e.Target, "uar") {
			pages[e.Target] = []byte{}
		}
	}
	return oracle.LibView(seq, pages)
}

// ClockVector is one input of mlx5dv_ts_to_ns: a clock_info snapshot and a device
// timestamp.
type ClockVector struct {
	Nsec, Cycles, Frac uint64
	Mult, Shift        uint32
	Mask, TS           uint64
}

// TsToNS runs libmlx5's mlx5dv_ts_to_ns (the static inline function of
// infiniband/mlx5dv.h, compiled into the harness) on every vector and returns the results.
func TsToNS(ctx context.Context, vs []ClockVector) ([]uint64, error) {
	in := make([]byte, 0, len(vs)*56)
	for _, v := range vs {
		for _, x := range []uint64{v.Nsec, v.Cycles, v.Frac, uint64(v.Mult), uint64(v.Shift), v.Mask, v.TS} {
			in = le.AppendUint64(in, x)
		}
	}
	out, err := oracle.RunTool(ctx, Driver{DefaultParams()}, in, "--ts-to-ns")
	if err != nil {
		return nil, err
	}
	if len(out) != 8*len(vs) {
		return nil, fmt.Errorf("mlx5 oracle ts_to_ns: %d bytes of results for %d vectors", len(out), len(vs))
	}
	res := make([]uint64, len(vs))
	for i := range res {
		res[i] = le.Uint64(out[8*i:])
	}
	return res, nil
}
