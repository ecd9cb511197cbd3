package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Exit statuses of guestrun besides the guest payload's own.
const (
	ExitInfra   = 3  // the test bed failed (fetch, build, boot, setup, timeout): no verdict
	ExitSkipped = 77 // a host prerequisite is missing (the automake convention)
)

// Tool is a host program the test bed needs and the Debian package providing it.
type Tool struct{ Program, Package string }

// HostTools lists the programs needed to run guests of the given architectures.
func HostTools(arches []string) []Tool {
	tools := []Tool{{"apt-get", "apt"}, {"apt-cache", "apt"}, {"dpkg", "dpkg"}, {"dpkg-deb", "dpkg"}, {"go", ""}, {"xz", "xz-utils"}}
	seen := map[string]bool{}
	for _, a := range arches {
		bin, pkg := QEMUBinary(a)
		if !seen[bin] {
			seen[bin] = true
			tools = append(tools, Tool{bin, pkg})
		}
	}
	return tools
}

// PrereqAction is what to do about missing host programs.
type PrereqAction int

const (
	PrereqOK      PrereqAction = iota
	PrereqInstall              // root on Debian: apt-get install the packages
	PrereqSkip                 // say what is missing, exit ExitSkipped
	PrereqFail                 // CI: a missing prerequisite is a failure
)

// DecidePrereqs chooses what to do about missing tools. Installing needs root on
// Debian and a package for every missing tool; in CI (CI=true) a prerequisite
// that cannot be installed fails the run instead of skipping it, so CI can never
// pass by testing nothing.
func DecidePrereqs(missing []Tool, root, debian, ci, allowInstall bool) PrereqAction {
	if len(missing) == 0 {
		return PrereqOK
	}
	installable := root && debian && allowInstall
	for _, t := range missing {
		installable = installable && t.Package != ""
	}
	switch {
	case installable:
		return PrereqInstall
	case ci:
		return PrereqFail
	default:
		return PrereqSkip
	}
}

// MissingTools returns the tools not found on PATH.
func MissingTools(tools []Tool) []Tool {
	var missing []Tool
	for _, t := range tools {
		if _, err := exec.LookPath(t.Program); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}

// EnsurePrereqs checks the host for tools and installs missing ones when it may.
// It returns PrereqOK when everything is (now) present; otherwise the returned
// action is PrereqSkip or PrereqFail and the error names what is missing.
func EnsurePrereqs(ctx context.Context, arches []string, allowInstall bool, log io.Writer) (PrereqAction, error) {
	tools := HostTools(arches)
	missing := MissingTools(tools)
	_, err := os.Stat("/etc/debian_version")
	action := DecidePrereqs(missing, os.Geteuid() == 0, err == nil, os.Getenv("CI") == "true", allowInstall)
	switch action {
	case PrereqOK:
		return PrereqOK, nil
	case PrereqInstall:
		pkgs := map[string]bool{}
		var list []string
		for _, t := range missing {
			if !pkgs[t.Package] {
				pkgs[t.Package] = true
				list = append(list, t.Package)
			}
		}
		fmt.Fprintf(log, "installing missing host packages: %s\n", strings.Join(list, " "))
		if err := aptInstall(ctx, list, log); err != nil {
			return PrereqFail, err
		}
		if still := MissingTools(tools); len(still) > 0 {
			return PrereqFail, fmt.Errorf("still missing after install: %s", toolNames(still))
		}
		return PrereqOK, nil
	default:
		return action, fmt.Errorf("missing host programs: %s (install them, as root: apt-get install %s)",
			toolNames(missing), toolPackages(missing))
	}
}

// aptInstall installs packages with the system's apt, updating the package lists
// first if an install attempt fails for want of them.
func aptInstall(ctx context.Context, pkgs []string, log io.Writer) error {
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.Run()
	}
	if install() == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, "apt-get", "update")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	if err := install(); err != nil {
		return fmt.Errorf("apt-get install %s: %w", strings.Join(pkgs, " "), err)
	}
	return nil
}

func toolNames(ts []Tool) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Program)
	}
	return strings.Join(s, ", ")
}

func toolPackages(ts []Tool) string {
	var s []string
	for _, t := range ts {
		if t.Package != "" && !strings.Contains(" "+strings.Join(s, " ")+" ", " "+t.Package+" ") {
			s = append(s, t.Package)
		}
	}
	return strings.Join(s, " ")
}
