package vm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Step names a phase of a guest run; every step has its own deadline.
type Step string

const (
	StepFetch    Step = "fetch"    // apt: packages into the cache
	StepBuild    Step = "build"    // go build/test -c, initramfs
	StepBoot     Step = "boot"     // qemu start until /init runs
	StepSetup    Step = "setup"    // modules, dummy link, rxe0 ACTIVE with GIDs
	StepRun      Step = "run"      // the tests or -cmd
	StepShutdown Step = "poweroff" // after the exit marker until qemu exits
)

// Deadlines bound the guest steps.
type Deadlines struct {
	Boot, Setup, Run, Shutdown time.Duration
}

// TimeoutError says which step ran out of time.
type TimeoutError struct {
	Step  Step
	Limit time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timeout: step %q did not finish within %s", e.Step, e.Limit)
}

// ErrPanic is wrapped by the error of a run whose guest kernel panicked.
var ErrPanic = errors.New("guest kernel panic")

// Result is what happened in the guest.
type Result struct {
	Kernel string // uname -r
	Status int    // the payload's exit status; -1 if it never reported one
	Err    error  // nil when the guest reported an exit status and nothing failed
	// Time spent in each guest step.
	Boot, Setup, Run time.Duration
	Tests            []TestTime
}

// TestTime is one test binary's status and duration.
type TestTime struct {
	Name     string
	Status   int
	Duration time.Duration
}

// Supervise follows a guest's console until it is done: lines delivers console
// lines and is closed when qemu's output ends; each is passed to echo. It returns
// when the guest has exited, a step overran its deadline, a failure was reported
// and the guest went down, or ctx ended. The caller kills qemu afterwards in every
// case, so Supervise never waits for a guest that will not end by itself.
func Supervise(ctx context.Context, lines <-chan string, cls *Classifier, d Deadlines, echo func(string)) Result {
	res := Result{Status: -1}
	step, limit := StepBoot, d.Boot
	stepStart := time.Now()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	enter := func(s Step, l time.Duration) time.Duration {
		now := time.Now()
		spent := now.Sub(stepStart)
		step, limit, stepStart = s, l, now
		timer.Reset(l)
		return spent
	}
	// After a reported failure the guest powers itself off (or, after a panic,
	// qemu exits because of -no-reboot); give it the shutdown deadline to do so.
	fail := func(err error) {
		if res.Err == nil {
			res.Err = err
		}
		if step != StepShutdown {
			enter(StepShutdown, d.Shutdown)
		}
	}
	var testStart time.Time
	for {
		select {
		case <-ctx.Done():
			if res.Err == nil {
				res.Err = fmt.Errorf("interrupted during step %q: %w", step, context.Cause(ctx))
			}
			return res
		case <-timer.C:
			if step == StepShutdown {
				// The guest finished (or failed) but did not power off: the
				// caller's kill ends it; only a missing exit status is an error.
				if res.Err == nil && res.Status < 0 {
					res.Err = &TimeoutError{Step: step, Limit: limit}
				}
				return res
			}
			res.Err = &TimeoutError{Step: step, Limit: limit}
			return res
		case line, ok := <-lines:
			if !ok {
				if res.Err == nil && res.Status < 0 {
					res.Err = fmt.Errorf("qemu exited during step %q without an exit status from the guest", step)
				}
				return res
			}
			echo(line)
			ev := cls.Classify(line)
			switch ev.Kind {
			case EvInit:
				if step == StepBoot {
					res.Boot = enter(StepSetup, d.Setup)
				}
			case EvKernel:
				res.Kernel = ev.Msg
			case EvModuleFail:
				fail(fmt.Errorf("module %s failed to load: %s", ev.Name, ev.Msg))
			case EvRxeFail:
				fail(fmt.Errorf("rxe link did not come up: %s", ev.Msg))
			case EvSetupFail:
				fail(fmt.Errorf("guest setup failed: %s", ev.Msg))
			case EvPanic:
				fail(fmt.Errorf("%w: %s", ErrPanic, ev.Msg))
			case EvReady:
				if step == StepSetup {
					res.Setup = enter(StepRun, d.Run)
				}
			case EvTestStart:
				testStart = time.Now()
			case EvTestEnd:
				res.Tests = append(res.Tests, TestTime{ev.Name, ev.Status, time.Since(testStart)})
			case EvExit:
				if step == StepRun {
					res.Status = ev.Status
					res.Run = enter(StepShutdown, d.Shutdown)
				}
			}
		}
	}
}
