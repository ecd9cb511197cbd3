package mesh

import (
	"context"
	"slices"
	"time"

	"github.com/gorping/gorping/mesh/agentdesc"
)

// selfDesc is the agent's current description of itself and its document.
type selfDesc struct {
	desc agentdesc.Description
	doc  []byte // the JSON served on /agent
}

// describeSelf reads this host's rails and stores the description if it changed,
// logging what cannot take part once per change. It reports whether it changed.
func (a *Agent) describeSelf(last *[]string) bool {
	cfg := a.cfg
	d, notes, err := a.d.rails.describe(cfg.AgentName, cfg.Group, cfg.Version, cfg.port)
	d.Instance = a.instance
	if err != nil {
		notes = append(notes, err.Error())
	}
	for _, p := range d.RailProblems() {
		notes = append(notes, p.Reason+": "+p.Detail)
	}
	if !slices.Equal(notes, *last) {
		for _, n := range notes {
			a.log.Warn("a local rail cannot take part (or not fully)", "detail", n)
		}
		*last = notes
	}
	doc, err := d.Marshal()
	if err != nil {
		// What the host gives is checked as a peer's would be; a value no peer could read
		// is not published (a rail with an odd name, say): said once per change.
		if msg := err.Error(); len(*last) == 0 || (*last)[len(*last)-1] != msg {
			a.log.Error("cannot describe this agent; its description keeps the last good one", "err", err)
			*last = append(*last, msg)
		}
		return false
	}
	if cur := a.self.Load(); cur != nil && string(cur.doc) == string(doc) {
		return false
	}
	a.self.Store(&selfDesc{desc: d, doc: doc})
	a.log.Info("this agent's description", "name", d.Name, "instance", d.Instance, "group", d.Group, "rails", len(d.Rails))
	return true
}

// watchRails describes this agent again every --dns-refresh (rails and their
// addresses change), until ctx ends; Run described it first. notes are what was logged.
func (a *Agent) watchRails(ctx context.Context, notes []string) {
	t := time.NewTicker(a.cfg.DNSRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.describeSelf(&notes)
		}
	}
}
