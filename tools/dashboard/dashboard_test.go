package main

import (
	"bytes"
	"os"
	"testing"
)

// The committed dashboard is what this program writes: after a change here, run
// `go run .` in tools/dashboard (or make dashboard) and commit deploy/grafana.
func TestCommittedDashboardIsCurrent(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../deploy/grafana/gorping-mesh.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("deploy/grafana/gorping-mesh.json is not what tools/dashboard writes: run `make dashboard` and commit it")
	}
}
