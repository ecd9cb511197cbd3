// Command gorping is a pure-Go drop-in replacement for rdma-core's rping.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gorping/gorping/rping"
)

func init() {
	// cli's default printers run templates through a tabwriter, which would
	// turn rping's TABs into spaces; print the usage verbatim instead.
	cli.HelpPrinter = func(w io.Writer, templ string, _ any) { io.WriteString(w, templ) }
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintf(c.App.Writer, "gorping %s (rping-compatible, rdma-core 44 protocol)\n", c.App.Version)
		if h := commit(); h != "" {
			fmt.Fprintf(c.App.Writer, "commit %s\n", h)
		}
	}
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	caught := make(chan syscall.Signal, 1)
	go func() {
		s := (<-sigs).(syscall.Signal)
		// A second signal, either of the two, kills at once if teardown hangs.
		signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		caught <- s
		cancel()
	}()
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	schedule = oneProcForEvents
	code, signalEndsRun := runCmd(ctx, os.Args[1:], posix, os.Stdout, os.Stderr)
	select {
	case s := <-caught:
		if signalEndsRun {
			break // --stats/--json client: Ctrl-C ends the run normally, as ping(8)'s does
		}
		// rping has no signal handlers: die by the signal, as the shell expects.
		runtime.LockOSThread()
		syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), s)
		os.Exit(128 + int(s))
	default:
	}
	os.Exit(code)
}

// schedule makes the process-wide scheduler choice for a run. main sets it;
// tests that call runCmd in-process leave it nil.
var schedule func(cfg rping.Config)

// oneProcForEvents runs an event-mode gorping on one P (GOMAXPROCS=1). Each
// completion event wakes the ping loop from the netpoller; with a second P the
// runtime also wakes and spins another thread looking for work, which costs a
// thread hand-off and CPU per event (README, Performance figures, has the
// measurement). --poll keeps every CPU: each busy-polling loop needs one of
// its own. A GOMAXPROCS in the environment is the user's choice and wins.
func oneProcForEvents(cfg rping.Config) {
	if cfg.Poll {
		return
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	runtime.GOMAXPROCS(1)
}

// run is the whole command without process-global effects: it parses args
// (rping's argv without the program name) and returns the exit status.
func run(ctx context.Context, args []string, posix bool, stdout, stderr io.Writer) int {
	st, _ := runCmd(ctx, args, posix, stdout, stderr)
	return st
}

// runCmd is run; signalEndsRun says that a signal ended (or would end) the run
// as its normal end, with the exit status returned: a client with --stats or
// --json reports its summary and exits as ping(8) does.
func runCmd(ctx context.Context, args []string, posix bool, stdout, stderr io.Writer) (status int, signalEndsRun bool) {
	for _, sc := range subcommands {
		if sc.match(args) {
			if schedule != nil && sc.schedule != nil {
				sc.schedule()
			}
			return sc.run(ctx, args[1:], stdout, stderr), sc.daemon
		}
	}
	app := &cli.App{
		Name:                  "gorping",
		Usage:                 "RDMA ping-pong test, compatible with rdma-core's rping",
		Version:               version(),
		CustomAppHelpTemplate: usageText,
		// rping's own getopt rules parse the command line, not cli's flags.
		SkipFlagParsing: true,
		HideHelp:        true,
		HideHelpCommand: true,
		HideVersion:     true,
		Writer:          stdout,
		ErrWriter:       stderr,
		Action: func(c *cli.Context) error {
			cfg, act, st := parseArgs(ctx, c.Args().Slice(), posix, stdout, stderr, resolveHost)
			switch act {
			case actUsage, actHelp:
				status = st
				return cli.ShowAppHelp(c)
			case actVersion:
				cli.ShowVersion(c)
			case actExit:
				status = st
			case actRun:
				signalEndsRun = !cfg.Server && (cfg.Stats || cfg.JSON)
				if schedule != nil {
					schedule(cfg)
				}
				status = rping.Run(ctx, cfg)
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
