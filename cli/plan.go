package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gorping/gorping/mesh/pinglist"
)

// planOptions are the values of `gorping mesh plan`'s options.
type planOptions struct {
	Members  string // --members FILE: one "HOST GROUP" line per agent
	Self     string // --self HOST: that agent's targets
	All      bool   // --all: every agent's targets
	Epoch    uint64 // --epoch N
	MaxPeers int    // --max-peers K (0: no limit)
}

// errPlanUsage marks runPlan's errors that are about the options themselves (exit 2).
var errPlanUsage = errors.New("usage")

// maxMembersFile bounds what runPlan reads: a million members on 64-byte lines.
const maxMembersFile = 64 << 20

// runPlan is `gorping mesh plan`: it writes one "AGENT TARGET" line per probe of the
// plan to stdout, hosts as written in the members file (agents in file order, each
// agent's targets by name), and the plan's Summary as one line to stderr. A members
// file with bad lines is refused, each line named on stderr.
func runPlan(o planOptions, stdout, stderr io.Writer) error {
	switch {
	case o.Members == "":
		return fmt.Errorf("%w: --members FILE is required", errPlanUsage)
	case o.All == (o.Self != ""):
		return fmt.Errorf("%w: give one of --self HOST and --all", errPlanUsage)
	case o.MaxPeers < 0:
		return fmt.Errorf("%w: --max-peers %d: must be 0 (no limit) or more", errPlanUsage, o.MaxPeers)
	}
	data, err := readBounded(o.Members, maxMembersFile)
	if err != nil {
		return err
	}
	ms, errs := pinglist.ParseMembers(data)
	for _, e := range errs {
		fmt.Fprintf(stderr, "%s:%v\n", o.Members, e)
	}
	if len(errs) > 0 {
		if len(errs) == 1 {
			return fmt.Errorf("members file %s: 1 bad line", o.Members)
		}
		return fmt.Errorf("members file %s: %d bad lines", o.Members, len(errs))
	}
	p, err := pinglist.New(ms, o.MaxPeers)
	if err != nil {
		return fmt.Errorf("members file %s: %w", o.Members, err)
	}
	agents := ms
	if !o.All {
		agents = nil
		for _, m := range ms {
			if m.Host == o.Self {
				agents = []pinglist.Member{{Host: o.Self}}
			}
		}
		if agents == nil {
			return fmt.Errorf("--self %s: not in members file %s", o.Self, o.Members)
		}
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
