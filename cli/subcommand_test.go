package cli

import (
	"context"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// No command line made of a subcommand's words alone runs rping: the rule that lets the
// subcommand take it (subcommand.go) holds for every entry of the table.
func TestSubcommandWordsNeverRunRping(t *testing.T) {
	for _, sc := range subcommands {
		var words []string
		for _, o := range sc.options {
			words = append(words, o.spellings()...)
			if o.arg != "" {
				words = append(words, "-s", "-c") // a value that is an rping option
			}
		}
		words = append(words, sc.args...)
		name := sc.nameWords()
		lines := [][]string{name, append(slices.Clone(name), words...)}
		for _, w := range words {
			lines = append(lines, append(slices.Clone(name), w))
		}
		for _, argv := range lines {
			if ours, _, _ := sc.match(argv); !ours {
				continue
			}
			if _, act, _ := parseArgs(context.Background(), argv, false, io.Discard, io.Discard, resolveHost); act == actRun {
				t.Errorf("%q is subcommand %s, but rping would run it", argv, sc.name)
			}
		}
	}
}

// No command line that rping would run is a subcommand's, whatever words follow the
// name: random lines of subcommand words, rping's options and values, and junk.
func TestRpingRunsStayRpings(t *testing.T) {
	vocab := []string{"-s", "-c", "-v", "-d", "-vs", "-sv", "-S", "64", "-C", "3", "-a", "127.0.0.1", "-p", "-P",
		"--", "-", "foo", "-x", "--st", "--stats", "--interval", "--interval=1", "1s", "--timeout", "5", "-h", "--help",
		"--json", "--verbose", "-i", "0", "bash", "addresses", "--bogus", "--json=1", "-vx"}
	for _, sc := range subcommands {
		for _, o := range sc.options {
			vocab = append(vocab, o.spellings()...)
		}
		vocab = append(vocab, sc.args...)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	claimed := 0
	for n := 0; n < 20000; n++ {
		sc := subcommands[rnd.IntN(len(subcommands))]
		argv := slices.Clone(sc.nameWords())
		for k := rnd.IntN(5); k > 0; k-- {
			argv = append(argv, vocab[rnd.IntN(len(vocab))])
		}
		ours, _, _ := sc.match(argv)
		if !ours {
			continue
		}
		claimed++
		for _, posix := range []bool{false, true} {
			if _, act, _ := parseArgs(context.Background(), argv, posix, io.Discard, io.Discard, fakeResolve); act == actRun {
				t.Errorf("%q (POSIXLY_CORRECT %v) is subcommand %s's, but rping would run it", argv, posix, sc.name)
			}
		}
	}
	if claimed < 1000 {
		t.Errorf("only %d of 20000 lines were a subcommand's: the test tried too little", claimed)
	}
}

func TestRpingOptionsFromParser(t *testing.T) {
	got := map[string]option{}
	for _, o := range rpingOptions() {
		for _, s := range o.spellings() {
			got[s] = o
		}
	}
	for _, sp := range []string{"-a", "-I", "-P", "-p", "-C", "-S", "-t", "-s", "-c", "-v", "-V", "-d", "-q", "-i", "-w",
		"--interval", "--deadline", "--help", "--version", "--poll", "--stats", "--json", "--trace"} {
		if _, ok := got[sp]; !ok {
			t.Errorf("rpingOptions lacks %s", sp)
		}
	}
	if o := got["-i"]; o.long != "interval" || o.arg == "" || o.help == "" {
		t.Errorf("-i: %+v", o)
	}
	if o := got["-S"]; o.arg != "size" || o.help != "ping data size" {
		t.Errorf("-S: %+v", o)
	}
	if got["-a"].value != valueAddr || got["-I"].value != valueAddr || got["-p"].value != valueAny || !got["-t"].hidden {
		t.Errorf("-a %+v -I %+v -p %+v -t %+v", got["-a"], got["-I"], got["-p"], got["-t"])
	}
}
