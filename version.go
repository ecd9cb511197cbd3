package main

import "runtime/debug"

// buildVersion can be set at link time: -ldflags "-X main.buildVersion=v1.2.3".
var buildVersion string

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
