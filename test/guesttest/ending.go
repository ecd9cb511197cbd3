package guesttest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ServerDisconnect is rping's server's line for RDMA_CM_EVENT_DISCONNECTED.
const ServerDisconnect = "server DISCONNECT EVENT..."

// serverFailed ends a non-persistent server's failed ping loop.
const serverFailed = "rping server failed: -1"

// waitLine is rping's complaint after a wake-up in a state other than the one its
// main loop waits for.
var waitLine = regexp.MustCompile(`^wait for (RDMA_READ_ADV|RDMA_READ_COMPLETE|RDMA_WRITE_ADV|RDMA_WRITE_COMPLETE) state (\d+)$`)

// remoteErrLine is rping's line for a completion that failed because the peer went
// away under it: IBV_WC_REM_INV_REQ_ERR (9), REM_ACCESS_ERR (10), REM_OP_ERR (11) or
// RETRY_EXC_ERR (12).
var remoteErrLine = regexp.MustCompile(`^cq completion failed status (9|10|11|12)$`)

// The states of rping's test_state that its server loop waits for, and the two it
// may find instead after a disconnect or a failed completion.
var waitedState = map[string]int{"RDMA_READ_ADV": 6, "RDMA_READ_COMPLETE": 7, "RDMA_WRITE_ADV": 8, "RDMA_WRITE_COMPLETE": 9}

const (
	stateDisconnected = 10
	stateError        = 11
)

// KilledClientEnding judges how a non-persistent server (gorping's, or stock rping's
// when stock is set) ended after its client was killed mid-run: code is its exit
// status, stderr what it printed there. It returns the ending seen, for the log, and
// what in it rping's server cannot print.
//
// rping's server has three threads that race here. The CM thread prints the
// DISCONNECT line, sets the state to DISCONNECTED (10) and wakes the main loop. The
// CQ thread, for a successful completion, sets the state it means (6 to 9) and wakes
// the loop; for a failed one (the dying client's QP NAKs a request, or its MR is
// gone) it prints "cq completion failed status N", sets ERROR (11), wakes the loop
// and stops. The main loop wakes once per wake-up, and if the state is not the one it
// waits for, prints "wait for X state N" and leaves; it then returns 0 if the state
// is DISCONNECTED at that moment, else -1 and the server prints "rping server failed:
// -1" and exits 255. So:
//   - exit 0 needs the DISCONNECT line (the state was 10, set after it);
//   - exit 255 needs "rping server failed: -1", after the wait line;
//   - a wait line's state 10 needs the DISCONNECT line before it, state 11 the failed
//     completion's line before it, and a state from 6 to 9 the DISCONNECT line before
//     it too (a completion that landed after the disconnect overwrote its state, and
//     the disconnect's wake-up is the extra one);
//   - the CM thread prints whenever the event arrives, even after "rping server
//     failed" while the process tears down, or never if the process exits first.
//
// Stock rping's loop always ends through a wait line. gorping's prints none when the
// client leaves between pings (it exits 0 there). Stock rping 44 may also replace a
// normal end's 0 by 255 with its spurious-exit line (V44SpuriousExit).
func KilledClientEnding(stock bool, code int, stderr string) (ending string, problems []string) {
	at := map[string]int{} // the index of each kind of line
	var lines []string
	waitState, waitWant := 0, 0
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if l == "" {
			continue
		}
		kind := l
		switch {
		case l == ServerDisconnect, l == serverFailed, stock && l == V44SpuriousExit:
		case remoteErrLine.MatchString(l):
			kind = "cq error"
		case waitLine.MatchString(l):
			kind = "wait"
			m := waitLine.FindStringSubmatch(l)
			waitWant = waitedState[m[1]]
			waitState, _ = strconv.Atoi(m[2])
		default:
			problems = append(problems, fmt.Sprintf("a line rping's server does not print here: %q", l))
			continue
		}
		if _, twice := at[kind]; twice {
			problems = append(problems, fmt.Sprintf("%q a second time (rping prints it once)", l))
			continue
		}
		at[kind] = len(lines)
		lines = append(lines, l)
	}
	has := func(kind string) bool { _, ok := at[kind]; return ok }
	before := func(a, b string) bool { return has(a) && has(b) && at[a] < at[b] }

	if _, v44 := at[V44SpuriousExit]; v44 && code == 255 && !has(serverFailed) {
		code = 0 // rping 44's spurious exit after a normal end
	}
	switch code {
	case 0:
		if has(serverFailed) {
			problems = append(problems, fmt.Sprintf("exit 0 after %q", serverFailed))
		}
		if !has(ServerDisconnect) {
			problems = append(problems, "exit 0 without the DISCONNECT line (rping ends 0 only in the state DISCONNECTED, set after that line)")
		}
	case 255:
		if !has(serverFailed) {
			problems = append(problems, fmt.Sprintf("exit 255 without %q", serverFailed))
		} else if has("wait") && !before("wait", serverFailed) {
			problems = append(problems, fmt.Sprintf("%q before the wait line", serverFailed))
		}
	default:
		problems = append(problems, fmt.Sprintf("exit status %d, want 0 or 255", code))
	}
	switch {
	case !has("wait"):
		if stock || code != 0 {
			problems = append(problems, "no \"wait for … state N\" line (rping's server loop ends only through one)")
		}
	case waitState == waitWant:
		problems = append(problems, "a wait line for the state the loop was in")
	case waitState == stateError:
		if !before("cq error", "wait") {
			problems = append(problems, "a wait line in state 11 (ERROR) without a failed completion's line before it")
		}
	case waitState == stateDisconnected || (waitState >= 6 && waitState <= 9):
		if !before(ServerDisconnect, "wait") {
			problems = append(problems, fmt.Sprintf("a wait line in state %d without the DISCONNECT line before it", waitState))
		}
	default:
		problems = append(problems, fmt.Sprintf("a wait line in state %d, which no event sets here", waitState))
	}

	first := "the disconnect came first"
	switch {
	case before("cq error", ServerDisconnect) || (has("cq error") && !has(ServerDisconnect)):
		first = "a work request in flight failed first"
	case waitState >= 6 && waitState <= 9:
		first = "the disconnect came first, and a completion after it overwrote its state"
	}
	return fmt.Sprintf("%s (exit %d): %s", first, code, strings.Join(lines, " | ")), problems
}
