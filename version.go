package main

import (
	"regexp"
	"runtime/debug"
)

// buildVersion and buildCommit are set at link time (the Makefile does, for the binary,
// the packages and the image alike): -ldflags "-X main.buildVersion=v1.2.3
// -X main.buildCommit=<full hash>".
var buildVersion, buildCommit string

// version is buildVersion, else the main module's version from the build info
// ("(devel)" for a build inside the source tree).
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// pseudoHash is the commit prefix at the end of a Go pseudo-version
// (v0.0.0-20261201133700-6b967d5abcde, v1.2.4-0.20261201133700-6b967d5abcde; +dirty
// or +incompatible may follow).
var pseudoHash = regexp.MustCompile(`[-.][0-9]{14}-([0-9a-f]{12})(\+.*)?$`)

// commit is buildCommit, else what the build info knows: the VCS revision the Go
// command stamped, or the commit prefix of a pseudo-version (`go install …@main`).
// "" when unknown (a tagged `go install …@v1.2.3` names no commit).
func commit() string {
	if buildCommit != "" {
		return buildCommit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	if m := pseudoHash.FindStringSubmatch(bi.Main.Version); m != nil {
		return m[1]
	}
	return ""
}
