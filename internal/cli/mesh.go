package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gorping/gorping/mesh"
	"github.com/gorping/gorping/mesh/pinglist"
)

// meshCommand is `gorping mesh`, the agent (package mesh runs it).
func meshCommand() *subcommand {
	return &subcommand{
		name:     "mesh",
		help:     "ping mesh agent exporting to Prometheus",
		synopsis: "mesh [options]",
		about: "An RDMA ping mesh agent: serves the rping protocol (a persistent server), keeps one rping\n" +
			"connection to every target, pings each once per interval and exports the results to\n" +
			"Prometheus (/metrics; /probe?target=HOST[:PORT]&count=N probes once; /-/healthy, /-/ready).\n" +
			"An option's value is the next word or follows \"=\"; DUR is a duration (500ms, 2s, 1m) or seconds (0.5).\n\n",
		options:  meshOptions,
		daemon:   true,
		schedule: mesh.Schedule,
		run: func(ctx context.Context, w words, env Env) int {
			return mesh.Main(ctx, w.raw, env.Version, env.Stdout, env.Stderr)
		},
	}
}

const (
	groupTargets   = "Targets (any rping server: gorping mesh, gorping -s -P, rping -s -P)"
	groupProbing   = "Probing"
	groupResponder = "Responder"
	groupHTTP      = "HTTP"
	groupAgents    = "Agents (peers found by the address of their listener)"
	groupLogs      = "Logs (on stderr)"
)

// meshOptions are mesh's options, in its usage's order.
var meshOptions = []option{
	{long: "targets", arg: "file", value: valueFile, group: groupTargets,
		help: "one host[:port] per line, # comments; re-read when it changes and on SIGHUP",
		man: "One target, **host[:port]**, per line; **#** starts a comment. Re-read when it changes\n" +
			"(checked every **--targets-reload**) and on SIGHUP, without a gap in the other targets'\n" +
			"series. A bad line (or one over 4096 bytes) is skipped, logged once per change of the\n" +
			"file and counted (**gorping_target_file_bad_lines**); a file that is not a regular file\n" +
			"or is over 8 MiB is refused and its last targets kept."},
	{long: "targets-reload", arg: "dur", group: groupTargets,
		help: "how often the file is checked for changes (default 2s, at least 100ms; 0: only on SIGHUP)"},
	{long: "peers", arg: "a,b,c", group: groupTargets, help: "targets on the command line (repeated: they add up)"},
	{long: "targets-dns", arg: "name[:port]", group: groupTargets,
		help: "every A/AAAA address of NAME (e.g. a Kubernetes headless Service)",
		man: "Every A/AAAA address of *name* (a Kubernetes headless Service lists every pod of a\n" +
			"DaemonSet), resolved again every **--dns-refresh**. A target on this agent's responder\n" +
			"port at one of this host's addresses is skipped."},
	{long: "dns-refresh", arg: "dur", group: groupTargets, help: "how often NAME is resolved again (default 30s, at least 1s)"},
	{long: "max-targets", arg: "n", group: groupTargets,
		help: "probe at most N targets (default 4096)",
		man: "Probe at most *n* targets (default 4096): the file's first, then **--peers**, then\n" +
			"**--targets-dns** in address order; the others are logged once and counted\n" +
			"(**gorping_targets_ignored**)."},

	{long: "interval", arg: "dur", group: groupProbing, help: "one ping per target per interval (default 1s, at least 10ms)"},
	{long: "paths", arg: "k", group: groupProbing,
		help: "K connections to each target, 1..16, each its own flow (default 1)",
		man: "Keep *k* RC connections (paths) to each target, 1..16 (default 1): each has its own QPs\n" +
			"and RoCEv2 UDP source port, so ECMP may hash it onto its own route, and pings once per\n" +
			"interval in its own slot. With 2 or more the agent exports **gorping_path_*** per path\n" +
			"and **gorping_target_paths_up**; **gorping_target_up** is 1 while one path works."},
	{long: "jitter", arg: "f", group: groupProbing,
		help: "each slot moves by up to F times the interval (default 0.1)",
		man:  "Each slot moves by up to *f* times the interval (default 0.1), so agents do not beat in step."},
	{long: "timeout", arg: "dur", group: groupProbing,
		help: "a ping that takes longer fails with reason timeout (default 1s, or the interval if shorter)",
		man: "A ping that takes longer fails with reason **timeout** (default 1s, or the interval if\n" +
			"shorter; at least 1ms). A longer one lets a slow ping outlast slots, which are skipped."},
	{long: "connect-timeout", arg: "dur", group: groupProbing, help: "bound of resolution and connection (default 5s, at least 100ms)"},
	{long: "backoff-max", arg: "dur", group: groupProbing,
		help: "cap of the reconnection backoff (default 30s)",
		man:  "A failed connection is dialled again after a capped exponential backoff, up to this (default 30s)."},
	{long: "size", arg: "n", group: groupProbing, help: "ping size in bytes, 23..65535 (default 64)"},
	{long: "source", arg: "addr", value: valueAddr, group: groupProbing, help: "source address the probes bind to"},

	{long: "port", arg: "n", group: groupResponder, help: "responder port, also the default port of targets (default 7174)"},
	{long: "bind", arg: "addr", value: valueAddr, group: groupResponder,
		help: "responder address (default ::, which serves IPv6 and IPv4)"},
	{long: "no-responder", group: groupResponder, help: "probe only"},

	{long: "web.listen-address", arg: "addr", group: groupHTTP,
		help: "metrics listener (default :10174; repeated: one listener per address)",
		man: "The HTTP listener (default **:10174**; repeated: one listener per address):\n" +
			"**/metrics**, **/-/healthy** (200 while the process runs), **/-/ready** (503 until the\n" +
			"responder listens), **/probe?target=HOST[:PORT]&count=N**, which pings a target N\n" +
			"times once and returns that probe's metrics (**probe_success** and\n" +
			"**probe_duration_seconds** as blackbox_exporter's), **/agent** (its description, for\n" +
			"its peers), and **/**, a page of the agent, its peers and its targets with their paths\n" +
			"and state, as **/metrics** says them (down first, at most 100 targets;\n" +
			"**?target=** and **?state=down** filter them)."},
	{long: "listen", arg: "addr", group: groupHTTP, help: "the same as --web.listen-address (its first name)"},
	{long: "web.config.file", arg: "file", value: valueFile, group: groupHTTP,
		help: "TLS and basic auth (Prometheus exporter-toolkit web configuration)",
		man: "The Prometheus exporter-toolkit web configuration (TLS, basic auth); it applies to every\n" +
			"path, the health endpoints included. A file broken at run time makes every request\n" +
			"answer 500 until it is fixed (the agent keeps probing); that, and a basic_auth_users\n" +
			"emptied (which asks for no credentials), is logged once per change of the file."},
	{long: "probe-allow", arg: "cidrs", group: groupHTTP,
		help: "/probe may also probe addresses in these prefixes (comma-separated; repeated: they add up)",
		man:  "By default **/probe** only probes targets the agent already has; this adds prefixes (comma-separated)."},
	{long: "probe-any", group: groupHTTP, help: "/probe may probe any target"},

	{long: "agent-name", arg: "name", group: groupAgents,
		help: "this agent's name in its description (/agent) and its peers' labels (default: the host name)"},
	{long: "group", arg: "name", group: groupAgents,
		help: "this agent's pinglist group: a ToR, a rack, a switch plane",
		man: "This agent's pinglist group (a ToR, a rack, a switch plane; in Kubernetes from a node\n" +
			"label), published in its description. Empty (what **--group=$(LABEL)** gives on a node\n" +
			"without the label): no group; the agents without one form a group together."},
	{long: "agents", arg: "a,b,c", group: groupAgents,
		help: "peer agents by their listener's host[:port] (default port 10174; repeated: they add up)",
		man: "Peer agents by any address their listener answers on, **host[:port]** (default port\n" +
			"10174; repeated: they add up). The agent reads each one's description (**/agent**)\n" +
			"every **--agents-refresh** and probes its rails from the matching local rail\n" +
			"(**--rails**). An address of this agent's own listener, or one answering with its name,\n" +
			"is skipped."},
	{long: "agents-file", arg: "file", value: valueFile, group: groupAgents,
		help: "one agent host[:port] per line, # comments; re-read like --targets",
		man: "One agent **host[:port]** per line, **#** comments; re-read when it changes (every\n" +
			"**--targets-reload**) and on SIGHUP. Bad lines are logged once per change and counted\n" +
			"(**gorping_agents_file_bad_lines**)."},
	{long: "agents-dns", arg: "name[:port]", group: groupAgents,
		help: "every A/AAAA address of NAME is an agent (resolved every --dns-refresh)"},
	{long: "agents-kubernetes", arg: "selector", group: groupAgents,
		help: "the agents are the Running pods SELECTOR selects in this pod's namespace (the API server)",
		man: "The agents are the Running pods the label selector **SELECTOR** selects in this pod's\n" +
			"namespace, read from the API server as the pod's service account (a list, then a\n" +
			"watch: it needs list and watch on pods): each named by its node, in the group of its\n" +
			"**topology.kubernetes.io/zone** label, at its pod IP on port 10174. An API server that\n" +
			"does not answer leaves the agents it listed last (**gorping_members_kubernetes_up** 0)."},
	{long: "agents.http-config", arg: "file", value: valueFile, group: groupAgents,
		help: "the HTTP client of /agent requests: scheme, tls_config, basic_auth, ... (Prometheus YAML)",
		man: "The HTTP client of the **/agent** requests, as in a Prometheus scrape config: **scheme**\n" +
			"(http or https) and Prometheus' HTTP client configuration (**tls_config**,\n" +
			"**basic_auth**, **authorization**, **proxy_url**, ...); relative file names are relative\n" +
			"to the file."},
	{long: "agents-refresh", arg: "dur", group: groupAgents,
		help: "how often every peer's /agent is read (default 30s, at least 100ms)"},
	{long: "agents-keep", arg: "dur", group: groupAgents,
		help: "a peer that stops answering keeps its rails this long (default 5m)",
		man: "A peer agent that stops answering keeps its last known rails this long (default 5m):\n" +
			"**gorping_peer_up** is 0 meanwhile, and a line is logged when it stops, answers again or\n" +
			"is forgotten."},
	{long: "rails", arg: "mode", value: valueWords, words: []string{"same-subnet", "all"}, group: groupAgents,
		help: "same-subnet: each local rail probes the peer rails in its subnets (default); all: every peer rail"},
	{long: "max-peers", arg: "k", group: groupAgents,
		help: "probe at most K peer agents, chosen by the pinglist (default 0: every peer)",
		man: "Probe at most *k* peer agents (each on its rails): every peer of this agent's group when\n" +
			"they leave room, the rest from other groups, chosen by the same deterministic plan as\n" +
			"**gorping mesh plan** over the known agents and this one."},
	{long: "rotate", arg: "dur", group: groupAgents,
		help: "the pinglist's epoch: its inter-group peers rotate (default 5m, at least 1s)"},

	{long: "log.format", arg: "format", value: valueWords, words: []string{"logfmt", "json", "text"}, group: groupLogs,
		help: "logfmt or json, Prometheus' log format (default logfmt; text is logfmt)"},
	{long: "log.level", arg: "level", value: valueWords, words: []string{"debug", "info", "warn", "error"}, group: groupLogs,
		help: "debug, info, warn or error (default info)"},

	helpOption,
}

// meshPlanCommand is `gorping mesh plan`: the pinglist an agent of a members file would
// probe (package mesh/pinglist computes it).
var meshPlanCommand = &subcommand{
	name:     "mesh plan",
	help:     "print the pinglist of a members file",
	synopsis: "mesh plan --members FILE (--self HOST | --all) [--epoch N] [--max-peers K]",
	about: "Print the targets a mesh agent of a members file probes in an epoch, one \"AGENT TARGET\"\n" +
		"line each, and the plan's summary on stderr (docs/mesh.md, pinglists): a full mesh inside\n" +
		"each group, a rotating sample of the other groups within the budget.\n\n",
	options: []option{
		{long: "members", arg: "file", value: valueFile, help: "one \"HOST GROUP\" line per agent, # comments",
			man: "The members file: one **HOST GROUP** line per agent (a rack, a ToR, a rail), **#**\n" +
				"starts a comment, a host on one line only. A bad line is refused with its number."},
		{long: "self", arg: "host", help: "the targets of this agent (a host of the members file)"},
		{long: "all", help: "the targets of every agent"},
		{long: "epoch", arg: "n", help: "the epoch whose sample to print (default 0)"},
		{long: "max-peers", arg: "k", help: "at most K targets per agent (default 0: no limit)"},
		helpOption,
	},
}

func init() {
	meshPlanCommand.run = func(_ context.Context, w words, env Env) int {
		o := pinglist.PlanOptions{Members: w.last("members", ""), Self: w.last("self", ""), All: w.has("all")}
		var err error
		if o.Epoch, err = strconv.ParseUint(w.last("epoch", "0"), 10, 64); err != nil {
			fmt.Fprint(env.Stderr, meshPlanCommand.usageError("--epoch %q: want a number, 0 or more", w.last("epoch", "")))
			return exitCommandUsage
		}
		if o.MaxPeers, err = strconv.Atoi(w.last("max-peers", "0")); err != nil {
			fmt.Fprint(env.Stderr, meshPlanCommand.usageError("--max-peers %q: want a number, 0 or more", w.last("max-peers", "")))
			return exitCommandUsage
		}
		err = pinglist.RunPlan(o, env.Stdout, env.Stderr)
		switch {
		case errors.Is(err, pinglist.ErrUsage):
			fmt.Fprint(env.Stderr, meshPlanCommand.usageError("%s", strings.TrimPrefix(err.Error(), pinglist.ErrUsage.Error()+": ")))
			return exitCommandUsage
		case err != nil:
			fmt.Fprintf(env.Stderr, "gorping mesh plan: %v\n", err)
			return 1
		}
		return 0
	}
}
