package pinglist

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// PlanOptions are the values of `gorping mesh plan`'s options.
type PlanOptions struct {
	Members  string // --members FILE: one "HOST GROUP" line per agent
	Self     string // --self HOST: that agent's targets
	All      bool   // --all: every agent's targets
	Epoch    uint64 // --epoch N
	MaxPeers int    // --max-peers K (0: no limit)
}

// ErrUsage marks RunPlan's errors that are about the options themselves (exit 2).
var ErrUsage = errors.New("usage")

// maxMembersFile bounds what RunPlan reads: a million members on 64-byte lines.
const maxMembersFile = 64 << 20

// RunPlan is `gorping mesh plan`: it writes one "AGENT TARGET" line per probe of the
// plan to stdout, hosts as written in the members file (agents in file order, each
// agent's targets by name), and the plan's Summary as one line to stderr. A members
// file with bad lines is refused, each line named on stderr.
func RunPlan(o PlanOptions, stdout, stderr io.Writer) error {
	switch {
	case o.Members == "":
		return fmt.Errorf("%w: --members FILE is required", ErrUsage)
	case o.All == (o.Self != ""):
		return fmt.Errorf("%w: give one of --self HOST and --all", ErrUsage)
	case o.MaxPeers < 0:
		return fmt.Errorf("%w: --max-peers %d: must be 0 (no limit) or more", ErrUsage, o.MaxPeers)
	}
	data, err := readBounded(o.Members, maxMembersFile)
	if err != nil {
		return err
	}
	ms, errs := ParseMembers(data)
	for _, e := range errs {
		fmt.Fprintf(stderr, "%s:%v\n", o.Members, e)
	}
	if len(errs) > 0 {
		return fmt.Errorf("members file %s: %s", o.Members, plural(len(errs), "bad line"))
	}
	p, err := New(ms, o.MaxPeers)
	if err != nil {
		return fmt.Errorf("members file %s: %w", o.Members, err)
	}
	agents := ms
	if !o.All {
		if _, ok := p.byHost[o.Self]; !ok {
			return fmt.Errorf("--self %s: not in members file %s", o.Self, o.Members)
		}
		agents = []Member{{Host: o.Self}}
	}
	if s := p.Summary(); s.Full {
		fmt.Fprintf(stderr, "plan: %v\n", s) // the same in every epoch
	} else {
		fmt.Fprintf(stderr, "plan: epoch %d: %v\n", o.Epoch, s)
	}
	w := bufio.NewWriter(stdout)
	for _, a := range agents {
		ts, err := p.Targets(a.Host, o.Epoch)
		if err != nil {
			return err
		}
		for _, t := range ts {
			fmt.Fprintf(w, "%s %s\n", a.Host, t.Host)
		}
	}
	return w.Flush()
}

func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("members file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("members file %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("members file %s: larger than %d MiB", name, limit>>20)
	}
	return data, nil
}
