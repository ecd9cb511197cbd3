package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	urfave "github.com/urfave/cli/v2"

	"github.com/gorping/gorping/cli/sighup"
	"github.com/gorping/gorping/mesh"
)

// meshAbout is what `gorping mesh --help` says before the options.
const meshAbout = "An RDMA ping mesh agent: serves the rping protocol (a persistent server), keeps one rping\n" +
	"connection to every target, pings each once per interval and exports the results to\n" +
	"Prometheus (/metrics; /probe?target=HOST[:PORT]&count=N probes once; /-/healthy, /-/ready).\n" +
	"An option's value is the next word or follows \"=\"; DUR is a duration (500ms, 2s, 1m) or seconds (0.5).\n" +
	"--web.listen-address, --peers, --agents and --probe.allow may be repeated and add up; every\n" +
	"other option is taken once, and an empty value is an error (but for --group: an empty group is none).\n" +
	"The options' earlier names (--targets, --listen, --agents-file, ...) are taken too (gorping(1) names them).\n\n"

// runMesh runs the agent cfg describes (err: its words' parse).
func runMesh(ctx context.Context, cfg mesh.Config, err error, env Env) int {
	if err == nil {
		cfg.Version, cfg.Log = env.Version, env.Stderr
		err = mesh.Run(ctx, cfg, hup())
	}
	switch {
	case err != nil && (errors.Is(err, mesh.ErrUsage) || errors.Is(err, errParse)):
		fmt.Fprintf(env.Stderr, "gorping mesh: %v (gorping mesh --help lists the options)\n", err)
		return exitCommandUsage
	case err != nil:
		fmt.Fprintf(env.Stderr, "gorping mesh: %v\n", err)
		return 1
	}
	return 0
}

const (
	groupTargets   = "Targets (any rping server: gorping mesh, gorping -s -P, rping -s -P)"
	groupProbing   = "Probing"
	groupResponder = "Responder"
	groupHTTP      = "HTTP"
	groupAgents    = "Agents (peers found by the address of their listener)"
	groupLogs      = "Logs (on stderr)"
)

// meshFlags are mesh's options, in its usage's order, bound to cfg's fields: the one
// declaration of each option (its parsing, its default, which is cfg's, its --help line,
// its gorping(1) entry and its completion). Names follow Prometheus' style: a name that
// starts with one of the option groups' nouns (web, log, targets, agents, dns, probe)
// goes on after a dot (--targets.file, --agents.refresh); the names they had before
// are aliases. The value's name is the usage's word in backquotes, as urfave/cli's
// help reads it (a last " (`WORD`)" names it only); meshMan has the longer descriptions gorping(1) gives some of them.
//
// Adding an option: a field in mesh.Config (checked in its check), and a flag here.
func meshFlags(cfg *mesh.Config) []urfave.Flag {
	return []urfave.Flag{
		&urfave.GenericFlag{Name: "targets.file", Aliases: []string{"targets"}, Category: groupTargets, TakesFile: true,
			Value: str(&cfg.TargetsFile), Usage: "one host[:port] per line, # comments; re-read when it changes and on SIGHUP (`FILE`)"},
		&urfave.GenericFlag{Name: "targets.reload", Aliases: []string{"targets-reload"}, Category: groupTargets,
			Value: duration(&cfg.TargetsReload), Usage: "how often the file is checked for changes, at least 100ms; 0: only on SIGHUP (`DUR`)"},
		&urfave.GenericFlag{Name: "peers", Category: groupTargets, Value: list(&cfg.Peers),
			Usage: "targets on the command line (repeated: they add up) (`a,b,c`)"},
		&urfave.GenericFlag{Name: "targets.dns", Aliases: []string{"targets-dns"}, Category: groupTargets, Value: str(&cfg.TargetsDNS),
			Usage: "every A/AAAA address of NAME (e.g. a Kubernetes headless Service) (`NAME[:PORT]`)"},
		&urfave.GenericFlag{Name: "dns.refresh", Aliases: []string{"dns-refresh"}, Category: groupTargets, Value: duration(&cfg.DNSRefresh),
			Usage: "how often the DNS names are resolved again, at least 1s (`DUR`)"},
		&urfave.GenericFlag{Name: "max-targets", Category: groupTargets, Value: integer(&cfg.MaxTargets),
			Usage: "probe at most `N` targets"},

		&urfave.GenericFlag{Name: "interval", Category: groupProbing, Value: duration(&cfg.Interval),
			Usage: "one ping per target per interval, at least 10ms (`DUR`)"},
		&urfave.GenericFlag{Name: "paths", Category: groupProbing, Value: integer(&cfg.Paths),
			Usage: "`K` connections to each target, 1..16, each its own flow"},
		&urfave.GenericFlag{Name: "path-lifetime", Category: groupProbing, Value: duration(&cfg.PathLifetime),
			Usage: "replace each path's connection after about `DUR` (at least 1m; 0: never), so paths keep sampling ECMP"},
		&urfave.GenericFlag{Name: "jitter", Category: groupProbing, Value: float(&cfg.Jitter),
			Usage: "each slot moves by up to `F` times the interval"},
		&urfave.GenericFlag{Name: "timeout", Category: groupProbing, Value: duration(&cfg.Timeout), DefaultText: "1s, or the interval if shorter",
			Usage: "a ping that takes longer fails with reason timeout (`DUR`)"},
		&urfave.GenericFlag{Name: "connect-timeout", Category: groupProbing, Value: duration(&cfg.ConnectTimeout),
			Usage: "bound of resolution and connection, at least 100ms (`DUR`)"},
		&urfave.GenericFlag{Name: "backoff-max", Category: groupProbing, Value: duration(&cfg.BackoffMax),
			Usage: "cap of the reconnection backoff (`DUR`)"},
		&urfave.GenericFlag{Name: "size", Category: groupProbing, Value: integer(&cfg.Size),
			Usage: "ping size in bytes, 23..65535 (`N`)"},
		&urfave.GenericFlag{Name: "source", Category: groupProbing, Value: str(&cfg.Source),
			Usage: "source address the probes bind to (`ADDR`)"},

		&urfave.GenericFlag{Name: "port", Category: groupResponder, Value: integer(&cfg.Port),
			Usage: "responder port, also the default port of targets (`N`)"},
		&urfave.GenericFlag{Name: "bind", Category: groupResponder, Value: str(&cfg.Bind),
			Usage: "responder address; :: serves IPv6 and IPv4 (`ADDR`)"},
		&urfave.GenericFlag{Name: "no-responder", Category: groupResponder, Value: boolean(&cfg.NoResponder),
			Usage: "probe only"},

		&urfave.GenericFlag{Name: "web.listen-address", Aliases: []string{"listen"}, Category: groupHTTP, Value: list(&cfg.Listen),
			Usage: "metrics listener (repeated: one listener per address) (`[HOST]:PORT`)"},
		&urfave.GenericFlag{Name: "web.config.file", Category: groupHTTP, TakesFile: true, Value: str(&cfg.WebConfigFile),
			Usage: "TLS and basic auth (Prometheus exporter-toolkit web configuration) (`FILE`)"},
		&urfave.GenericFlag{Name: "probe.allow", Aliases: []string{"probe-allow"}, Category: groupHTTP, Value: list(&cfg.ProbeAllow),
			Usage: "/probe may also probe addresses in these prefixes (comma-separated; repeated: they add up) (`CIDRS`)"},
		&urfave.GenericFlag{Name: "probe.any", Aliases: []string{"probe-any"}, Category: groupHTTP, Value: boolean(&cfg.ProbeAny),
			Usage: "/probe may probe any target"},

		&urfave.GenericFlag{Name: "agent-name", Category: groupAgents, Value: str(&cfg.AgentName), DefaultText: "the host name",
			Usage: "this agent's name in its description (/agent) and its peers' labels (`NAME`)"},
		&urfave.GenericFlag{Name: "group", Category: groupAgents, Value: emptyOK(str(&cfg.Group)),
			Usage: "this agent's pinglist group: a ToR, a rack, a switch plane (`NAME`)"},
		&urfave.GenericFlag{Name: "agents", Category: groupAgents, Value: list(&cfg.Agents),
			Usage: "peer agents by their listener's host[:port] (default port 10174; repeated: they add up) (`a,b,c`)"},
		&urfave.GenericFlag{Name: "agents.file", Aliases: []string{"agents-file"}, Category: groupAgents, TakesFile: true, Value: str(&cfg.AgentsFile),
			Usage: "one agent host[:port] per line, # comments; re-read like --targets.file (`FILE`)"},
		&urfave.GenericFlag{Name: "agents.dns", Aliases: []string{"agents-dns"}, Category: groupAgents, Value: str(&cfg.AgentsDNS),
			Usage: "every A/AAAA address of NAME is an agent (resolved every --dns.refresh) (`NAME[:PORT]`)"},
		&urfave.GenericFlag{Name: "agents.kubernetes", Aliases: []string{"agents-kubernetes"}, Category: groupAgents, Value: str(&cfg.AgentsKubernetes),
			Usage: "the agents are the Running pods SELECTOR selects in this pod's namespace (the API server) (`SELECTOR`)"},
		&urfave.GenericFlag{Name: "agents.http-config", Category: groupAgents, TakesFile: true, Value: str(&cfg.AgentsHTTPConfig),
			Usage: "the HTTP client of /agent requests: scheme, tls_config, basic_auth, ... (Prometheus YAML) (`FILE`)"},
		&urfave.GenericFlag{Name: "agents.refresh", Aliases: []string{"agents-refresh"}, Category: groupAgents, Value: duration(&cfg.AgentsRefresh),
			Usage: "how often every peer's /agent is read, at least 100ms (`DUR`)"},
		&urfave.GenericFlag{Name: "agents.keep", Aliases: []string{"agents-keep"}, Category: groupAgents, Value: duration(&cfg.AgentsKeep),
			Usage: "a peer that stops answering keeps its rails this long (`DUR`)"},
		&urfave.GenericFlag{Name: "rails", Category: groupAgents, Value: oneOf(&cfg.Rails, "same-subnet", "all"),
			Usage: "same-subnet: each local rail probes the peer rails in its subnets; all: every peer rail (`MODE`)"},
		&urfave.GenericFlag{Name: "max-peers", Category: groupAgents, Value: integer(&cfg.MaxPeers), DefaultText: "0: every peer",
			Usage: "probe at most `K` peer agents, chosen by the pinglist"},
		&urfave.GenericFlag{Name: "rotate", Category: groupAgents, Value: duration(&cfg.Rotate),
			Usage: "the pinglist's epoch: its inter-group peers rotate, at least 1s (`DUR`)"},

		&urfave.GenericFlag{Name: "log.format", Category: groupLogs, Value: oneOf(&cfg.LogFormat, "logfmt", "json", "text"),
			Usage: "logfmt or json, Prometheus' log formats (text is logfmt) (`FORMAT`)"},
		&urfave.GenericFlag{Name: "log.level", Category: groupLogs, Value: oneOf(&cfg.LogLevel, "debug", "info", "warn", "error"),
			Usage: "debug, info, warn or error (`LEVEL`)"},
	}
}

// meshMan are gorping(1)'s descriptions of the mesh options that say more than their
// usage line (by name; the others have their usage line there).
var meshMan = map[string]string{
	"targets.file": "One target, **host[:port]**, per line; **#** starts a comment. Re-read when it changes\n" +
		"(checked every **--targets.reload**) and on SIGHUP, without a gap in the other targets'\n" +
		"series. A bad line (or one over 4096 bytes) is skipped, logged once per change of the\n" +
		"file and counted (**gorping_target_file_bad_lines**); a file that is not a regular file\n" +
		"or is over 8 MiB is refused and its last targets kept.",
	"targets.dns": "Every A/AAAA address of *name* (a Kubernetes headless Service lists every pod of a\n" +
		"DaemonSet), resolved again every **--dns.refresh**. A target on this agent's responder\n" +
		"port at one of this host's addresses is skipped.",
	"max-targets": "Probe at most *n* targets (default 4096): the file's first, then **--peers**, then\n" +
		"**--targets.dns** in address order; the others are logged once and counted\n" +
		"(**gorping_targets_ignored**).",
	"paths": "Keep *k* RC connections (paths) to each target, 1..16 (default 1): each has its own QPs\n" +
		"and RoCEv2 UDP source port, so ECMP may hash it onto its own route, and pings once per\n" +
		"interval in its own slot. With 2 or more the agent exports **gorping_path_*** per path\n" +
		"and **gorping_target_paths_up**; **gorping_target_up** is 1 while one path works.",
	"agents.kubernetes": "The agents are the Running pods the label selector *selector* selects in this pod's\n" +
		"namespace, read from the API server as the pod's service account (a list, then a\n" +
		"watch: it needs list and watch on pods): each named by its node, in the group of its\n" +
		"**topology.kubernetes.io/zone** label, at its pod IP on port 10174. An agent reads\n" +
		"the /agent of the peers its pinglist chooses only, conditionally (**If-None-Match**).\n" +
		"An API server that does not answer leaves the agents it listed last\n" +
		"(**gorping_members_kubernetes_up** 0).",
	"path-lifetime": "Replace each path's connection after a lifetime drawn from [*dur*/2, 3*dur*/2) (default 10m;\n" +
		"at least 1m; 0: never), the new connection made before the old one closes, so a target's\n" +
		"paths keep sampling the fabric's ECMP hash space and a dead member stays visible. While a\n" +
		"path of a target fails and another works, its connections live 15 s or 15 intervals for\n" +
		"5 minutes. A new connection whose first ping fails counts in **gorping_dead_connections_total**.",
	"jitter": "Each slot moves by up to *f* times the interval (default 0.1), so agents do not beat in step.",
	"timeout": "A ping that takes longer fails with reason **timeout** (default 1s, or the interval if\n" +
		"shorter; at least 1ms). A longer one lets a slow ping outlast slots, which are skipped.",
	"backoff-max": "A failed connection is dialled again after a capped exponential backoff, up to this (default 30s).",
	"web.listen-address": "The HTTP listener (default **:10174**; repeated: one listener per address; **--listen**\n" +
		"is the same): **/metrics**, **/-/healthy** (200 while the process runs), **/-/ready** (503 until the\n" +
		"responder listens), **/probe?target=HOST[:PORT]&count=N**, which pings a target N\n" +
		"times once and returns that probe's metrics (**probe_success** and\n" +
		"**probe_duration_seconds** as blackbox_exporter's), **/agent** (its description, for\n" +
		"its peers), and **/**, a page of the agent, its peers and its targets with their paths\n" +
		"and state, as **/metrics** says them (down first, at most 100 targets;\n" +
		"**?target=** and **?state=down** filter them).",
	"web.config.file": "The Prometheus exporter-toolkit web configuration (TLS, basic auth); it applies to every\n" +
		"path, the health endpoints included. A file broken at run time makes every request\n" +
		"answer 500 until it is fixed (the agent keeps probing); that, and a basic_auth_users\n" +
		"emptied (which asks for no credentials), is logged once per change of the file.",
	"probe.allow": "By default **/probe** only probes targets the agent already has; this adds prefixes (comma-separated).",
	"group": "This agent's pinglist group (a ToR, a rack, a switch plane; in Kubernetes from a node\n" +
		"label), published in its description. Empty (what **--group=$(LABEL)** gives on a node\n" +
		"without the label): no group; the agents without one form a group together.",
	"agents": "Peer agents by any address their listener answers on, **host[:port]** (default port\n" +
		"10174; repeated: they add up). The agent reads each one's description (**/agent**)\n" +
		"every **--agents.refresh** and probes its rails from the matching local rail\n" +
		"(**--rails**). An address of this agent's own listener, or one answering with its name,\n" +
		"is skipped.",
	"agents.file": "One agent **host[:port]** per line, **#** comments; re-read when it changes (every\n" +
		"**--targets.reload**) and on SIGHUP. Bad lines are logged once per change and counted\n" +
		"(**gorping_agents_file_bad_lines**).",
	"agents.http-config": "The HTTP client of the **/agent** requests, as in a Prometheus scrape config: **scheme**\n" +
		"(http or https) and Prometheus' HTTP client configuration (**tls_config**,\n" +
		"**basic_auth**, **authorization**, **proxy_url**, ...); relative file names are relative\n" +
		"to the file.",
	"agents.keep": "A peer agent that stops answering keeps its last known rails this long (default 5m):\n" +
		"**gorping_peer_up** is 0 meanwhile, and a line is logged when it stops, answers again or\n" +
		"is forgotten.",
	"max-peers": "Probe at most *k* peer agents (each on its rails): every peer of this agent's group when\n" +
		"they leave room, the rest from other groups, chosen by the same deterministic plan as\n" +
		"**gorping mesh plan** over the known agents and this one.",
}

// planFlags are `gorping mesh plan`'s options, bound to o.
func planFlags(o *planOptions) []urfave.Flag {
	return []urfave.Flag{
		&urfave.GenericFlag{Name: "members", TakesFile: true, Value: str(&o.Members),
			Usage: "one \"HOST GROUP\" line per agent, # comments (`FILE`)"},
		&urfave.GenericFlag{Name: "self", Value: str(&o.Self), Usage: "the targets of this agent (a host of the members file) (`HOST`)"},
		&urfave.GenericFlag{Name: "all", Value: boolean(&o.All), Usage: "the targets of every agent"},
		&urfave.GenericFlag{Name: "epoch", Value: uinteger(&o.Epoch), DefaultText: "0", Usage: "the epoch whose sample to print (`N`)"},
		&urfave.GenericFlag{Name: "max-peers", Value: number(&o.MaxPeers), DefaultText: "0: no limit",
			Usage: "at most `K` targets per agent"},
	}
}

// planMan are gorping(1)'s longer descriptions of mesh plan's options.
var planMan = map[string]string{
	"members": "The members file: one **HOST GROUP** line per agent (a rack, a ToR, a rail), **#**\n" +
		"starts a comment, a host on one line only. A bad line is refused with its number.",
}

// runMeshPlan runs `gorping mesh plan` (err: its words' parse).
func runMeshPlan(o planOptions, err error, env Env) int {
	if err == nil {
		err = runPlan(o, env.Stdout, env.Stderr)
	}
	switch {
	case errors.Is(err, errParse), errors.Is(err, errPlanUsage):
		msg := strings.TrimPrefix(err.Error(), errPlanUsage.Error()+": ")
		fmt.Fprintf(env.Stderr, "gorping mesh plan: %s (gorping mesh plan --help)\n", msg)
		return exitCommandUsage
	case err != nil:
		fmt.Fprintf(env.Stderr, "gorping mesh plan: %v\n", err)
		return 1
	}
	return 0
}

// hup is the agent's SIGHUP: the process's, taken at its start (package sighup), or,
// in a process that did not start as an agent (tests), nil: mesh.Run takes it.
func hup() <-chan os.Signal { return sighup.Chan() }

func ptr[T any](v T) *T { return &v }
