// Package cli is gorping's command line, the top of the house (it imports mesh, rping
// and uverbs): rping's options, parsed by rping's getopt rules byte for byte and declared
// once in rpingLine, and gorping's own commands (devices, completion, mesh, mesh plan),
// urfave/cli Commands whose Flags are their options' one declaration (commands.go). The
// usage texts, gorping(1)'s option lists and the shell completions are generated from
// both.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"

	urfave "github.com/urfave/cli/v2"

	"github.com/gorping/gorping/cli/sighup"
	"github.com/gorping/gorping/mesh"
	"github.com/gorping/gorping/rping"
)

// Env is what a run of the command line gets from its process.
type Env struct {
	Version string // the binary's version (--version, the completion scripts' header)
	Commit  string // its commit, "" when unknown
	Posix   bool   // POSIXLY_CORRECT is set: options end at the first non-option word
	Stdout  io.Writer
	Stderr  io.Writer
	// Schedule lets the run make its process-wide scheduler choice (GOMAXPROCS; main
	// sets it, in-process tests do not).
	Schedule bool
}

func init() {
	// cli's default printers run templates through a tabwriter, which would
	// turn rping's TABs into spaces; print the usage verbatim instead.
	urfave.HelpPrinter = func(w io.Writer, templ string, _ any) { io.WriteString(w, templ) }
	urfave.VersionPrinter = func(c *urfave.Context) {
		fmt.Fprintf(c.App.Writer, "gorping %s (rping-compatible, rdma-core 44 protocol)\n", c.App.Version)
		if h, _ := c.App.Metadata["commit"].(string); h != "" {
			fmt.Fprintf(c.App.Writer, "commit %s\n", h)
		}
	}
}

// Run runs the command line args (rping's argv without the program name) and returns
// its exit status; signalEndsRun says that a signal ended (or would end) the run as its
// normal end, with the exit status returned: a client with --stats or --json reports
// its summary and exits as ping(8) does, and mesh ends on SIGTERM.
func Run(ctx context.Context, args []string, env Env) (status int, signalEndsRun bool) {
	if env.Version == "" {
		env.Version = "(devel)"
	}
	for _, sc := range subcommands {
		ours, w, errLine := sc.match(args)
		switch {
		case !ours:
			continue
		case w.has("help"):
			io.WriteString(env.Stdout, sc.usage())
			return 0, false
		case errLine != "":
			io.WriteString(env.Stderr, errLine)
			return exitCommandUsage, false
		}
		return runOwn(ctx, args, env), sc.daemon
	}
	sighup.Release() // rping's command line: SIGHUP ends it, as it ends rping
	stdout, stderr := env.Stdout, env.Stderr
	app := &urfave.App{
		Name:                  "gorping",
		Usage:                 "RDMA ping-pong test, compatible with rdma-core's rping",
		Version:               env.Version,
		Metadata:              map[string]any{"commit": env.Commit},
		CustomAppHelpTemplate: rpingUsage,
		// rping's own getopt rules parse the command line, not cli's flags.
		SkipFlagParsing: true,
		HideHelp:        true,
		HideHelpCommand: true,
		HideVersion:     true,
		Writer:          stdout,
		ErrWriter:       stderr,
		Action: func(c *urfave.Context) error {
			cfg, act, st := parseArgs(ctx, c.Args().Slice(), env.Posix, stdout, stderr, resolveHost)
			switch act {
			case actUsage:
				status = st
				return urfave.ShowAppHelp(c)
			case actHelp:
				// rping's usage first, as it is (scripts read it), then gorping's.
				c.App.CustomAppHelpTemplate = rpingUsage + gorpingHelp()
				return urfave.ShowAppHelp(c)
			case actVersion:
				urfave.ShowVersion(c)
			case actExit:
				status = st
			case actRun:
				signalEndsRun = !cfg.Server && (cfg.Stats || cfg.JSON)
				if env.Schedule {
					oneProcForEvents(cfg)
				}
				status = rping.Run(ctx, cfg)
				if status == exitNoDevice && noDevices() {
					fmt.Fprintln(stderr, noDevicesHint)
				}
			}
			return nil
		},
	}
	if err := app.RunContext(ctx, append([]string{"rping"}, args...)); err != nil {
		fmt.Fprintf(stderr, "gorping: %v\n", err)
		return 1, false
	}
	return status, signalEndsRun
}

// runOwn runs args, a command line of one of gorping's own commands, and returns its
// exit status.
func runOwn(ctx context.Context, args []string, env Env) int {
	status := 0
	cmds := commands(handlers{
		mesh: func(cfg mesh.Config, err error) int {
			if env.Schedule {
				mesh.Schedule()
			}
			return runMesh(ctx, cfg, err, env)
		},
		plan:       func(o planOptions, err error) int { return runMeshPlan(o, err, env) },
		devices:    func(verbose, asJSON bool, err error) int { return runDevices(verbose, asJSON, env) },
		completion: func(args []string) int { return runCompletion(args, env) },
	}, &status)
	if err := runCommand(ctx, cmds, args); err != nil {
		// The subcommand rule has let through only words the command takes: this is
		// urfave/cli's own complaint, which should not happen.
		fmt.Fprintf(env.Stderr, "gorping %s: %v\n", args[0], err)
		return exitCommandUsage
	}
	return status
}

// oneProcForEvents runs an event-mode gorping on one P (GOMAXPROCS=1). Each
// completion event wakes the ping loop from the netpoller; with a second P the
// runtime also wakes and spins another thread looking for work, which costs a
// thread hand-off and CPU per event (docs/benchmarks.md has the measurement).
// --poll keeps every CPU: each busy-polling loop needs one of its own. A
// GOMAXPROCS in the environment is the user's choice and wins.
func oneProcForEvents(cfg rping.Config) {
	if cfg.Poll {
		return
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	runtime.GOMAXPROCS(1)
}
