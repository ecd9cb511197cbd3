// Package sighup takes SIGHUP for `gorping mesh` before anything that takes time: its
// default action ends the process, so a reload sent right after the start (systemctl
// reload after start) killed an agent still starting. A package's init runs before
// main and before the inits of the packages that sort after it and do not depend on it
// (the Prometheus client, the providers); this one depends on the standard library
// only.
package sighup

import (
	"os"
	"os/signal"
	"syscall"
)

var ch chan os.Signal

func init() {
	if len(os.Args) > 1 && os.Args[1] == "mesh" {
		ch = make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGHUP)
	}
}

// Chan is the process's SIGHUP, taken since the start; nil if the process is not an
// agent's (its first argument is not "mesh").
func Chan() <-chan os.Signal { return ch }

// Release gives SIGHUP its default action back: the command line was not the agent's
// after all (`gorping mesh -s` is rping's), and rping dies by it as rping does.
func Release() {
	if ch != nil {
		signal.Stop(ch)
		signal.Reset(syscall.SIGHUP)
	}
}
