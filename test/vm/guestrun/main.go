// Command guestrun runs gorping's guest tests (or a shell command) inside a QEMU
// guest booting a Debian kernel with Soft-RoCE (rdma_rxe) and stock rping.
//
//	go run ./test/vm/guestrun                                   # ./test/guest in bookworm/amd64
//	go run ./test/vm/guestrun -suite trixie -pkgs ./uverbs -run TestX
//	go run ./test/vm/guestrun -matrix                           # every guest of vm.Matrix
//	go run ./test/vm/guestrun -cmd 'rping -s -a $GORPING_IPV4 & sleep 1; $GORPING_BIN -c -a $GORPING_IPV4 -C 3 -v'
//	go run ./test/vm/guestrun -cmd sh -i                        # a shell in the guest
//	go run ./test/vm/guestrun -script test/vm/demo-local.sh     # gorping server and client in one guest
//	go run ./test/vm/guestrun -hosts 2 -script test/vm/demo.sh  # two guests; the script runs on the host, gx reaches them
//	go run ./test/vm/guestrun -hosts 3 -hold                    # keep three guests up for gx by hand
//
// Use a built binary (make guest, or go build ./test/vm/guestrun) where the exit
// status matters: go run turns every non-zero status into 1.
//
// Exit status: the guest payload's own status (0 = pass), 3 when the test bed
// itself failed (fetch, build, boot, setup, a timeout), 77 when a host
// prerequisite is missing and cannot be installed (with CI=true: 3 instead).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gorping/gorping/test/vm"
)

func main() { os.Exit(run()) }

func run() int {
	var (
		suite     = flag.String("suite", "bookworm", "Debian suite of the guest: bookworm or trixie")
		arch      = flag.String("arch", "amd64", "Debian architecture of the guest: amd64 or arm64")
		flavour   = flag.String("kernel-flavour", "", "another kernel of the architecture: 16k (arm64, trixie: 16 KiB pages)")
		matrix    = flag.Bool("matrix", false, "run every guest: "+targets(vm.Matrix))
		pkgs      = flag.String("pkgs", "./test/guest", "Go packages (space or comma separated) whose guest-tagged tests run, in order; \"all\": every package with guest-tagged tests")
		runRe     = flag.String("run", "", "only tests matching this regexp (go test -run)")
		skipRe    = flag.String("skip", "", "leave out tests matching this regexp (go test -skip); the run says so")
		count     = flag.Int("count", 1, "run each test this many times (go test -count), to hunt races")
		cmd       = flag.String("cmd", "", "run this shell command in the guest instead of the tests")
		script    = flag.String("script", "", "run this shell script file in the guest instead of the tests")
		after     = flag.String("after-script", "", "run this shell script file in the guest after the tests, in the same boot; its status counts as a test binary's")
		afterOn   = flag.String("after-on", "", "with -matrix: only this target (suite/arch) runs -after-script and gets the -add files")
		inter     = flag.Bool("i", false, "connect stdin to the guest console (use with -cmd, e.g. -cmd sh)")
		refresh   = flag.Bool("refresh", false, "re-resolve and download changed packages even if the cache is complete")
		fetchOnly = flag.Bool("fetch-only", false, "only fill the package cache")
		keep      = flag.Bool("keep", false, "keep the work directory (initramfs, binaries)")
		noInstall = flag.Bool("no-install", false, "never apt-get install missing host programs")
		timeout   = flag.Duration("timeout", 0, "deadline of the run step (tests or -cmd); default 10m")
		bootTO    = flag.Duration("boot-timeout", 0, "deadline from qemu start to /init; default 2m (arm64 4m)")
		setupTO   = flag.Duration("setup-timeout", 0, "deadline for modules and rxe0; default 2m (arm64 4m)")
		fetchTO   = flag.Duration("fetch-timeout", 0, "deadline of the package fetch; default 15m")
		buildTO   = flag.Duration("build-timeout", 0, "deadline of go builds and the initramfs; default 5m")
		siwRaw    = flag.Bool("siw-unpatched", false, "experiment: build siw.ko without the test bed's accept fix (docs/siw-accept-race.md)")
		siwDelay  = flag.Duration("siw-accept-delay", 0, "experiment: build siw.ko with this busy-wait after siw_accept's MPA reply, widening the race window")
		hosts     = flag.Int("hosts", 0, "multi-host test bed: boot this many guests on one virtual Ethernet and run -script on the host (gx reaches the guests), or -hold")
		netKind   = flag.String("net", vm.NetSwitch, "with -hosts: the data link, switch (QEMU dgram + host switch) or socket (QEMU TCP socket, 2 hosts)")
		cpus      = flag.Int("cpus", 1, "with -hosts: vCPUs per guest")
		hold      = flag.Bool("hold", false, "with -hosts: keep the cluster up (after -script, if any) until Ctrl-C")
		pcap      = flag.String("pcap", "", "with -hosts: write every frame the switch forwards to this pcap file")
		console   = flag.Bool("console", false, "with -hosts: echo the guests' consoles (else shown only when the script fails)")
	)
	var files []vm.GuestFile
	flag.Func("add", "add a host file to the guest as HOST:GUEST (absolute guest path; repeatable), e.g. a .deb to install", func(v string) error {
		i := strings.LastIndex(v, ":")
		if i <= 0 || !strings.HasPrefix(v[i+1:], "/") {
			return fmt.Errorf("want HOST:/guest/path, got %q", v)
		}
		st, err := os.Stat(v[:i])
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", v[:i])
		}
		files = append(files, vm.GuestFile{Path: v[i+1:], Host: v[:i], Mode: st.Mode().Perm()})
		return nil
	})
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./test/vm/guestrun [flags]\n\n"+
			"Boots a Debian kernel with Soft-RoCE under QEMU and runs gorping's guest tests there.\n"+
			"Exit status: the guest's own (0 pass), %d test bed failure, %d host prerequisite missing.\n\n", vm.ExitInfra, vm.ExitSkipped)
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "guestrun: unexpected arguments %q (quote -cmd's command)\n", flag.Args())
		return 2
	}

	if *script != "" {
		if *cmd != "" {
			fmt.Fprintln(os.Stderr, "guestrun: -cmd and -script exclude each other")
			return 2
		}
		b, err := os.ReadFile(*script)
		if err != nil {
			fmt.Fprintf(os.Stderr, "guestrun: %v\n", err)
			return 2
		}
		*cmd = string(b)
	}

	var afterText string
	if *after != "" {
		if *cmd != "" || *hosts > 0 {
			fmt.Fprintln(os.Stderr, "guestrun: -after-script runs after the tests: not with -cmd, -script or -hosts")
			return 2
		}
		b, err := os.ReadFile(*after)
		if err != nil {
			fmt.Fprintf(os.Stderr, "guestrun: %v\n", err)
			return 2
		}
		afterText = string(b)
	}
	if *afterOn != "" && (*after == "" || !*matrix) {
		fmt.Fprintln(os.Stderr, "guestrun: -after-on needs -matrix and -after-script")
		return 2
	}
	if *afterOn != "" && !strings.Contains(" "+targets(vm.Matrix)+",", " "+*afterOn+",") {
		fmt.Fprintf(os.Stderr, "guestrun: -after-on %s is not a target of the matrix (%s)\n", *afterOn, targets(vm.Matrix))
		return 2
	}

	if *hosts > 0 {
		return runCluster(clusterFlags{hosts: *hosts, net: *netKind, cpus: *cpus, hold: *hold, pcap: *pcap, script: *script, console: *console,
			target: vm.Target{Suite: *suite, Arch: *arch}, noInstall: *noInstall, timeout: *timeout})
	}
	targetList := []vm.Target{{Suite: *suite, Arch: *arch}}
	if *matrix {
		targetList = vm.Matrix
	}
	var arches []string
	for _, t := range targetList {
		if t.Arch != "amd64" && t.Arch != "arm64" {
			fmt.Fprintf(os.Stderr, "guestrun: unsupported architecture %q\n", t.Arch)
			return 2
		}
		arches = append(arches, t.Arch)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	switch action, err := vm.EnsurePrereqs(ctx, arches, !*noInstall, os.Stderr); action {
	case vm.PrereqOK:
	case vm.PrereqSkip:
		fmt.Printf("guestrun: SKIPPED, %v\n", err)
		return vm.ExitSkipped
	default:
		fmt.Printf("guestrun: FAILED, %v\n", err)
		return vm.ExitInfra
	}

	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "guestrun: %v\n", err)
		return vm.ExitInfra
	}
	cache, err := vm.CacheRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "guestrun: %v\n", err)
		return vm.ExitInfra
	}

	var reports []vm.Report
	for _, t := range targetList {
		to := vm.DefaultTimeouts(t.Arch)
		set := func(dst *time.Duration, v time.Duration) {
			if v > 0 {
				*dst = v
			}
		}
		set(&to.Run, *timeout)
		set(&to.Boot, *bootTO)
		set(&to.Setup, *setupTO)
		set(&to.Fetch, *fetchTO)
		set(&to.Build, *buildTO)
		if *fetchOnly {
			if err := fetch(ctx, t, *flavour, cache, *refresh, to.Fetch); err != nil {
				fmt.Printf("guest %s: ERROR in step fetch: %v\n", t, err)
				return vm.ExitInfra
			}
			continue
		}
		tAfter, tFiles := afterText, files
		if *afterOn != "" && t.String() != *afterOn {
			tAfter, tFiles = "", nil
		}
		rep := vm.Run(ctx, vm.Options{
			Target:        t,
			ModuleRoot:    root,
			Pkgs:          strings.FieldsFunc(*pkgs, func(r rune) bool { return r == ',' || r == ' ' }),
			TestRun:       *runRe,
			TestSkip:      *skipRe,
			TestCount:     *count,
			Cmd:           *cmd,
			After:         tAfter,
			Timeouts:      to,
			Refresh:       *refresh,
			Interactive:   *inter,
			Keep:          *keep,
			CacheRoot:     cache,
			Siw:           vm.SiwVariant{Unpatched: *siwRaw, AcceptDelay: *siwDelay},
			KernelFlavour: *flavour,
			Files:         tFiles,
			Out:           os.Stdout,
		})
		fmt.Println(rep.Verdict())
		reports = append(reports, rep)
		if ctx.Err() != nil {
			break
		}
	}
	code, passed := 0, 0
	if len(reports) > 1 || len(reports) == 1 && len(reports[0].Failures) > 0 {
		fmt.Println("summary:")
	}
	for _, r := range reports {
		if len(reports) > 1 {
			fmt.Println("  " + r.Verdict())
		}
		for _, l := range r.Failures {
			fmt.Println("    | " + l)
		}
		if r.ExitCode() == 0 {
			passed++
		}
		if code == 0 {
			code = r.ExitCode()
		}
	}
	if *skipRe != "" {
		fmt.Printf("tests left out of this run (-skip): %s\n", *skipRe)
	}
	// The plain closing line CI tools read: one count per guest.
	fmt.Printf("guests: %d passed, %d failed\n", passed, len(reports)-passed)
	return code
}

// fetch fills the cache for one target (-fetch-only).
func fetch(ctx context.Context, t vm.Target, flavour, cache string, refresh bool, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	f := &vm.Fetcher{Target: t, KernelFlavour: flavour, Root: cache, Refresh: refresh, Log: os.Stdout}
	r, err := f.Fetch(ctx)
	if err != nil {
		return err
	}
	r.Release()
	fmt.Printf("guest %s: kernel %s cached in %s\n", t, r.Manifest.Kernel, r.Dir)
	return nil
}

// moduleRoot is the directory of the go.mod governing the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run guestrun inside the gorping module")
	}
	return filepath.Dir(mod), nil
}

func targets(ts []vm.Target) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}
