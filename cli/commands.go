package cli

import (
	"context"
	"errors"
	"io"
	"strings"

	urfave "github.com/urfave/cli/v2"

	"github.com/gorping/gorping/mesh"
)

// gorping's own commands are urfave/cli Commands: each one's Flags, bound to the
// configuration the command runs with, are the one declaration of its options: urfave/cli
// parses them, and the subcommand table (subcommand.go: the rule that tells them from
// rping's command line, the usage texts, gorping(1)'s option lists and the completions)
// is generated from them (subcommandsOf).

// handlers are what the commands do with their parsed options; err is the parse's
// (a bad value, errParse).
type handlers struct {
	mesh       func(cfg mesh.Config, err error) int
	plan       func(o planOptions, err error) int
	devices    func(verbose, asJSON bool, err error) int
	completion func(args []string) int
}

// commands are gorping's commands, their flags bound to a fresh configuration each;
// the one that runs sets *status.
func commands(h handlers, status *int) []*urfave.Command {
	p := &parseState{}
	meshCfg := mesh.DefaultConfig()
	var plan planOptions
	var verbose, asJSON bool
	cmds := []*urfave.Command{
		{
			Name: "devices", Usage: "list the RDMA devices", UsageText: "devices [-v] [--json]",
			Description: "List the RDMA devices with a uverbs node: driver, node GUID, ports with state, physical\n" +
				"state, link layer, active MTU, rate and netdev, and whether gorping has a provider for the\n" +
				"driver.\n",
			Flags: []urfave.Flag{
				&urfave.GenericFlag{Name: "verbose", Aliases: []string{"v"}, Value: boolean(&verbose),
					Usage: "also node type, firmware, system image GUID, LIDs and the GID tables"},
				&urfave.GenericFlag{Name: "json", Value: boolean(&asJSON), Usage: "one JSON document instead of text"},
			},
			Action: func(*urfave.Context) error { *status = h.devices(verbose, asJSON, p.err); return nil },
		},
		{
			Name: "completion", Usage: "print a shell completion script", UsageText: "completion bash|zsh|fish|addresses",
			ArgsUsage: strings.Join(append(completionShells, "addresses"), "|"),
			Description: "Print the completion script for bash, zsh or fish on stdout (gorping(1), SHELL COMPLETION,\n" +
				"says where to put it). \"addresses\" prints the IPv4 and IPv6 addresses of the network\n" +
				"devices of the local RDMA devices, one per line: what the scripts offer after -a and -I.\n",
			Action: func(c *urfave.Context) error { *status = h.completion(c.Args().Slice()); return nil },
		},
		{
			Name: "mesh", Usage: "ping mesh agent exporting to Prometheus", UsageText: "mesh [options]",
			Description: meshAbout,
			Flags:       meshFlags(&meshCfg),
			Action:      func(*urfave.Context) error { *status = h.mesh(meshCfg, p.err); return nil },
			Subcommands: []*urfave.Command{{
				Name: "plan", Usage: "print the pinglist of a members file",
				UsageText: "mesh plan --members FILE (--self HOST | --all) [--epoch N] [--max-peers K]",
				Description: "Print the targets a mesh agent of a members file probes in an epoch, one \"AGENT TARGET\"\n" +
					"line each, and the plan's summary on stderr (docs/mesh.md, pinglists): a full mesh inside\n" +
					"each group, a rotating sample of the other groups within the budget.\n\n",
				Flags:  planFlags(&plan),
				Action: func(*urfave.Context) error { *status = h.plan(plan, p.err); return nil },
			}},
		},
	}
	walk(cmds, "", func(_ string, c *urfave.Command) {
		for _, f := range c.Flags {
			bind(f, p)
		}
	})
	return cmds
}

// manTexts are gorping(1)'s longer descriptions of some options, by command and name.
var manTexts = map[string]map[string]string{
	"devices": {
		"verbose": "Also node type, firmware, system image GUID, LIDs (InfiniBand) and the GID table\n" +
			"(index, GID, type IB / RoCE v1 / RoCE v2, netdev).",
		"json": "The same as one JSON document (below; still printed when there are no devices).",
	},
	"mesh":      meshMan,
	"mesh plan": planMan,
}

// walk calls fn for each command, with its full name ("mesh plan"), its subcommands
// before it.
func walk(cmds []*urfave.Command, parent string, fn func(name string, c *urfave.Command)) {
	for _, c := range cmds {
		name := strings.TrimSpace(parent + " " + c.Name)
		walk(c.Subcommands, name, fn)
		fn(name, c)
	}
}

// subcommandsOf is the subcommand table of cmds: a longer name before its prefix (`mesh
// plan` is not mesh's argument "plan").
func subcommandsOf(cmds []*urfave.Command) []*subcommand {
	var out []*subcommand
	walk(cmds, "", func(name string, c *urfave.Command) {
		sc := &subcommand{name: name, help: c.Usage, synopsis: c.UsageText, about: c.Description,
			options: append(optionsOf(c.Flags, manTexts[name]), helpOption), daemon: name == "mesh"}
		if c.ArgsUsage != "" {
			sc.args = strings.Split(c.ArgsUsage, "|")
		}
		out = append(out, sc)
	})
	return out
}

// runCommand runs args (a command line the subcommand rule gave to one of cmds) with
// urfave/cli, which parses the options into the command's configuration.
func runCommand(ctx context.Context, cmds []*urfave.Command, args []string) error {
	walk(cmds, "", func(_ string, c *urfave.Command) {
		c.Flags = expandAliases(c.Flags)
		c.HideHelp, c.HideHelpCommand = true, true
	})
	app := &urfave.App{
		Name: "gorping", Commands: cmds, HideHelp: true, HideHelpCommand: true, HideVersion: true,
		Writer: io.Discard, ErrWriter: io.Discard,
	}
	return app.RunContext(ctx, append([]string{"gorping"}, args...))
}

// expandAliases makes each alias a flag of its own over the same value: urfave/cli would
// refuse two forms of one flag (--listen beside --web.listen-address, which add up) and
// set the value again under each other name after the parse.
func expandAliases(flags []urfave.Flag) []urfave.Flag {
	var out []urfave.Flag
	for _, f := range flags {
		g, ok := f.(*urfave.GenericFlag)
		if !ok || len(g.Aliases) == 0 {
			out = append(out, f)
			continue
		}
		for i, n := range append([]string{g.Name}, g.Aliases...) {
			c := *g
			c.Name, c.Aliases = n, nil
			if i > 0 {
				c.Value = alias{g.Value, n}
			}
			out = append(out, &c)
		}
	}
	return out
}

// errParse is what errors.Is finds in a bad value's error.
var errParse = errors.New("bad value")

type parseError struct{ error }

func (e parseError) Unwrap() error        { return e.error }
func (e parseError) Is(target error) bool { return target == errParse }

// parseMesh is what `gorping mesh ARGS` parses into (tests).
func parseMesh(args []string) (cfg mesh.Config, err error) {
	var st int
	cmds := commands(handlers{mesh: func(c mesh.Config, e error) int { cfg, err = c, e; return 0 }}, &st)
	if rerr := runCommand(context.Background(), cmds, append([]string{"mesh"}, args...)); rerr != nil {
		return cfg, rerr
	}
	return cfg, err
}
