// Command gorping is a pure-Go drop-in replacement for rdma-core's rping.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/gorping/gorping/cli"
	_ "github.com/gorping/gorping/uverbs/providers" // the providers gorping ships: chosen here, once
)

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
	code, signalEndsRun := cli.Run(ctx, os.Args[1:], cli.Env{
		Version: version(), Commit: commit(), Posix: posix,
		Stdout: os.Stdout, Stderr: os.Stderr, Schedule: true,
	})
	select {
	case s := <-caught:
		if signalEndsRun {
			break // --stats/--json client, mesh: the signal ends the run normally, as ping(8)'s Ctrl-C does
		}
		// rping has no signal handlers: die by the signal, as the shell expects.
		runtime.LockOSThread()
		syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), s)
		os.Exit(128 + int(s))
	default:
	}
	os.Exit(code)
}
