package campaign

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Flags of `make detect` (the defaults are the small campaign `make test` runs).
var (
	fHosts    = flag.Int("campaign.hosts", 20, "hosts")
	fGroup    = flag.Int("campaign.group", 5, "hosts per ToR group")
	fRails    = flag.Int("campaign.rails", 2, "rails per host")
	fSpines   = flag.Int("campaign.spines", 4, "spines per rail (ECMP members)")
	fPaths    = flag.Int("campaign.paths", 4, "--paths")
	fMaxPeers = flag.Int("campaign.max-peers", 8, "--max-peers (0: every peer)")
	fInterval = flag.Duration("campaign.interval", time.Second, "--interval")
	fSeed     = flag.Uint64("campaign.seed", 1, "the seed of the faults' places and the fabric's draws")
	fQuiet    = flag.Duration("campaign.quiet", 15*time.Minute, "fault-free time after the fleet start")
	fFaultFor = flag.Duration("campaign.fault-for", 8*time.Minute, "how long each fault lasts")
	fGap      = flag.Duration("campaign.gap", 6*time.Minute, "time between a repair and the next fault")
	fKinds    = flag.String("campaign.kinds", "", "comma-separated kinds (default: every kind)")
	fSkip     = flag.String("campaign.skip", "", "comma-separated kinds to leave out")
	fPairs    = flag.Bool("campaign.pairs", false, "also two kinds at once")
	fVerbose  = flag.Bool("campaign.progress", false, "print the faults as they start and end")
	fOut      = flag.String("campaign.out", "", "also write the report to this file (make detect prints it)")
	fDebug    = flag.String("campaign.debug", "", "PromQL expressions (;-separated) printed every minute with -campaign.progress")
)

func TestCampaign(t *testing.T) {
	cfg := Config{Shape: Shape{Hosts: *fHosts, GroupSize: *fGroup, Rails: *fRails, Spines: *fSpines},
		Paths: *fPaths, MaxPeers: *fMaxPeers, Interval: *fInterval, Seed: *fSeed, Quiet: *fQuiet,
		FaultFor: *fFaultFor, Gap: *fGap, Kinds: Kinds, Pairs: *fPairs,
		Rules: []string{"../../deploy/prometheus/gorping-rules.yml"}}
	if *fKinds != "" {
		cfg.Kinds = nil
		for _, k := range strings.Split(*fKinds, ",") {
			found := false
			for _, x := range Kinds {
				if strings.EqualFold(x, strings.TrimSpace(k)) {
					cfg.Kinds, found = append(cfg.Kinds, x), true
				}
			}
			if !found {
				t.Fatalf("-campaign.kinds: %q is not one of %q", k, Kinds)
			}
		}
	}
	if *fSkip != "" {
		for _, k := range strings.Split(*fSkip, ",") {
			n := len(cfg.Kinds)
			cfg.Kinds = slices.DeleteFunc(cfg.Kinds, func(x string) bool { return strings.EqualFold(x, strings.TrimSpace(k)) })
			if len(cfg.Kinds) == n {
				t.Fatalf("-campaign.skip: %q is not one of %q", k, cfg.Kinds)
			}
		}
	}
	if *fDebug != "" {
		cfg.Debug = strings.Split(*fDebug, ";")
	}
	if *fVerbose {
		cfg.Progress = os.Stdout
	}
	wall := time.Now()
	var res *Result
	var err error
	synctest.Test(t, func(t *testing.T) {
		res, err = Run(cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Score()
	var b strings.Builder
	rep.Write(&b, res, time.Since(wall))
	t.Log("\n" + b.String())
	if *fOut != "" {
		if err := os.WriteFile(*fOut, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, f := range rep.Failures() {
		t.Errorf("under its goal: %s", f)
	}
}
