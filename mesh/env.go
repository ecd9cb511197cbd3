package mesh

import (
	"context"
	"errors"
	"os"

	"github.com/gorping/gorping/internal/meshenv"
	"github.com/gorping/gorping/rping"
)

// NewIn is New for an agent whose world is env rather than this host: the fault
// campaign (test/campaign) runs the real agent over a simulated fabric with it. Such an
// agent installs no signal handler and serves no responder (the fabric answers for it).
func NewIn(cfg Config, env meshenv.Env) (*Agent, error) {
	if env.Dial == nil || env.Local == nil || env.Rails == nil || env.Listener == nil || env.AgentDial == nil {
		return nil, errors.New("mesh.NewIn: every seam of meshenv.Env is required")
	}
	rails := env.Rails
	a, err := newAgent(cfg, deps{dial: env.Dial, local: env.Local, hup: make(chan os.Signal), // no SIGHUP
		rails: &hostRails{fixed: rails}, listener: env.Listener, agentDial: env.AgentDial, respond: respondNothing})
	if err != nil {
		return nil, err
	}
	if env.Registered != nil {
		env.Registered(a.m.reg)
	}
	return a, nil
}

// respondNothing is the responder of an agent in a simulated fabric: it listens at
// once and until ctx ends (the fabric answers the probes).
func respondNothing(ctx context.Context, cfg rping.ResponderConfig) error {
	if cfg.Listening != nil {
		cfg.Listening()
	}
	<-ctx.Done()
	return ctx.Err()
}
