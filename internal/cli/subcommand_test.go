package cli

import (
	"context"
	"io"
	"testing"
)

// No command line made of a subcommand's words alone runs rping: the rule that lets the
// subcommand take it (devices.go) holds for every entry of the table.
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
		lines := [][]string{{sc.name}, append([]string{sc.name}, words...)}
		for _, w := range words {
			lines = append(lines, []string{sc.name, w})
		}
		for _, argv := range lines {
			if !sc.match(argv) {
				continue
			}
			if _, act, _ := parseArgs(context.Background(), argv, false, io.Discard, io.Discard, resolveHost); act == actRun {
				t.Errorf("%q is subcommand %s, but rping would run it", argv, sc.name)
			}
		}
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
	if !got["-a"].addr || !got["-I"].addr || got["-p"].addr || !got["-t"].hidden {
		t.Errorf("-a %+v -I %+v -p %+v -t %+v", got["-a"], got["-I"], got["-p"], got["-t"])
	}
}
