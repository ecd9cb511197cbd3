// Package cli is gorping's command line: rping's options (parsed by rping's getopt
// rules, byte for byte), gorping's own, and the subcommands (devices, completion, mesh),
// each declared once in the option tables that the usage texts, gorping(1)'s option lists
// and the shell completions are generated from.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"

	urfave "github.com/urfave/cli/v2"

	"github.com/gorping/gorping/cli/sighup"
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
		if env.Schedule && sc.schedule != nil {
			sc.schedule()
		}
		return sc.run(ctx, w, env), sc.daemon
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
