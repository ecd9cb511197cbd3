package main

import "testing"

// A `go install …@<commit>` binary knows its commit from the pseudo-version.
func TestPseudoVersionCommit(t *testing.T) {
	for v, want := range map[string]string{
		"v0.0.0-20261201133700-6b967d5abcde":       "6b967d5abcde",
		"v0.0.0-20261201133700-6b967d5abcde+dirty": "6b967d5abcde",
		"v1.2.4-0.20261201133700-6b967d5abcde":     "6b967d5abcde",
		"v1.2.3":                                   "",
		"v1.2.3-rc.1":                              "",
		"(devel)":                                  "",
	} {
		got := ""
		if m := pseudoHash.FindStringSubmatch(v); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%s: commit %q, want %q", v, got, want)
		}
	}
}
