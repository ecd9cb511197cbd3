package vm

import (
	"strconv"
	"strings"
)

// The guest's init script reports progress on the console as marker lines:
//
//	@@gr-<nonce> init                    /init started (the boot step is over)
//	@@gr-<nonce> kernel <uname -r>
//	@@gr-<nonce> module-fail <name> <msg>  a required module did not load
//	@@gr-<nonce> module-warn <name> <msg>  an optional one did not
//	@@gr-<nonce> rxe-fail <msg>            rxe0 did not come up
//	@@gr-<nonce> setup-fail <msg>          anything else in setup failed
//	@@gr-<nonce> ready                     setup done, the payload starts
//	@@gr-<nonce> test-start <name>
//	@@gr-<nonce> test-end <name> <status>
//	@@gr-<nonce> exit <status>             the payload's exit status
//
// The nonce is random per run, so nothing a test prints can pass for a marker.
// Markers are searched anywhere in a line: a kernel message may share the line.

// EventKind tells what a console line means to the host.
type EventKind int

const (
	EvOutput     EventKind = iota // ordinary output
	EvInit                        // marker "init"
	EvKernel                      // marker "kernel": Msg is the version
	EvModuleFail                  // Name, Msg
	EvModuleWarn                  // Name, Msg
	EvRxeFail                     // Msg
	EvSetupFail                   // Msg
	EvReady                       // marker "ready"
	EvTestStart                   // Name
	EvTestEnd                     // Name, Status
	EvExit                        // Status
	EvPanic                       // the kernel panicked: Msg is the line
)

// Event is a classified console line.
type Event struct {
	Kind   EventKind
	Name   string
	Msg    string
	Status int
}

// Classifier recognises the markers of one run and kernel panics.
type Classifier struct{ prefix string }

// MarkerPrefix is what every marker line of a run with this nonce starts with.
func MarkerPrefix(nonce string) string { return "@@gr-" + nonce + " " }

// NewClassifier returns a classifier for the run with this nonce.
func NewClassifier(nonce string) *Classifier { return &Classifier{prefix: MarkerPrefix(nonce)} }

// Classify interprets one console line (without its line ending).
func (c *Classifier) Classify(line string) Event {
	i := strings.Index(line, c.prefix)
	if i < 0 {
		if strings.Contains(line, "Kernel panic") {
			return Event{Kind: EvPanic, Msg: strings.TrimSpace(line)}
		}
		return Event{Kind: EvOutput}
	}
	word, rest, _ := strings.Cut(strings.TrimSpace(line[i+len(c.prefix):]), " ")
	nameMsg := func() (string, string) {
		n, m, _ := strings.Cut(rest, " ")
		return n, strings.TrimSpace(m)
	}
	status := func(s string) int {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return -1
		}
		return n
	}
	switch word {
	case "init":
		return Event{Kind: EvInit}
	case "kernel":
		return Event{Kind: EvKernel, Msg: rest}
	case "module-fail", "module-warn":
		n, m := nameMsg()
		k := EvModuleFail
		if word == "module-warn" {
			k = EvModuleWarn
		}
		return Event{Kind: k, Name: n, Msg: m}
	case "rxe-fail":
		return Event{Kind: EvRxeFail, Msg: rest}
	case "setup-fail":
		return Event{Kind: EvSetupFail, Msg: rest}
	case "ready":
		return Event{Kind: EvReady}
	case "test-start":
		return Event{Kind: EvTestStart, Name: rest}
	case "test-end":
		n, m := nameMsg()
		return Event{Kind: EvTestEnd, Name: n, Status: status(m)}
	case "exit":
		return Event{Kind: EvExit, Status: status(rest)}
	}
	return Event{Kind: EvOutput}
}
