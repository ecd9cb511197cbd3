package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// deploy/kubernetes/Containerfile builds the image make image builds: the same files at
// the same paths, the same user and entrypoint (no container runtime here to build it).
func TestContainerfileBuildsTheImage(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kubernetes/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var from, user, ep string
	var dests []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || strings.HasPrefix(l, "#") {
			continue
		}
		switch f[0] {
		case "FROM":
			from = f[1]
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			ep = strings.TrimSpace(strings.TrimPrefix(l, "ENTRYPOINT"))
		case "COPY":
			dests = append(dests, strings.TrimPrefix(f[len(f)-1], "/"))
		}
	}
	if from != "scratch" {
		t.Errorf("FROM %q: the image is FROM scratch", from)
	}
	if user != imageUser {
		t.Errorf("USER %q, make image's is %q", user, imageUser)
	}
	if want := `["` + entrypoint + `"]`; ep != want {
		t.Errorf("ENTRYPOINT %s, make image's is %s", ep, want)
	}
	want := imageFiles()
	slices.Sort(dests)
	if !slices.Equal(dests, want) {
		t.Errorf("the Containerfile copies to %q, make image's layer has %q", dests, want)
	}
	if !regexp.MustCompile(`COPY bin/gorping-linux-\$\{TARGETARCH\} /usr/bin/gorping`).Match(data) {
		t.Error("the Containerfile does not copy make's binary for TARGETARCH")
	}
}
