// Command release builds gorping's release artifacts out of what `make` built: .deb and
// .rpm packages (nfpm as a library) and a multi-architecture OCI image
// (go-containerregistry, no container daemon). It lives in its own module, so none of
// this reaches gorping's go.mod.
//
//	release package -version V -commit C -date EPOCH -bin bin -man bin/gorping.1 -completions bin/completion -out bin/release
//	release image   -version V -commit C -date EPOCH -bin bin -out bin/release
//	release unpack  -layout bin/release/oci -arch amd64 -out rootfs.tar
//
// `make release` runs the first two; the tests (and the guest test) use unpack, which
// flattens one platform's image into a file-system tar and prints its entrypoint and user.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// Arches are the architectures gorping is released for (Go and Debian names alike).
var Arches = []string{"amd64", "arm64"}

// Build describes what is being released.
type Build struct {
	Version    string    // the binary's version, e.g. v0.0.0-20261201133700-6b967d5abcde
	Commit     string    // the full commit hash
	Date       time.Time // the commit's time: every timestamp in the artifacts
	BinDir     string    // holds gorping-linux-<arch>
	Man        string    // the roff man page
	Completion string    // holds gorping.bash, _gorping, gorping.fish
	License    string    // LICENSE
	Maintainer string
	Out        string // output directory
}

// Binary is the path of the static binary for arch.
func (b Build) Binary(arch string) string { return b.BinDir + "/gorping-linux-" + arch }

// Maintainer is the packages' maintainer unless the builder names another (a
// distribution's packager sets MAINTAINER): the project, at the no-reply address GitHub
// gives its account, so that nobody mails a placeholder; bugs go to the Homepage's issues.
const Maintainer = "The gorping project <gorping@users.noreply.github.com>"

const (
	homepage    = "https://github.com/gorping/gorping"
	summary     = "RDMA ping-pong test, a pure-Go drop-in replacement for rping"
	description = "gorping runs rdma-core's rping test with rping's flags, output and\n" +
		"exit statuses, interoperating with stock rping, from one static binary\n" +
		"that needs no rdma-core libraries: it talks to /dev/infiniband itself\n" +
		"and carries its own data paths for rxe (Soft-RoCE), siw (Soft-iWARP),\n" +
		"mlx5 (ConnectX-4 and later), bnxt_re (Broadcom NetXtreme-C/E, Thor),\n" +
		"irdma (Intel E810 in RoCEv2 mode) and hns (HiSilicon HIP08, HIP09).\n" +
		"gorping-mesh.service runs it as a mesh agent that pings its peers and\n" +
		"exports to Prometheus."
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var b Build
	var epoch int64
	fs.StringVar(&b.Version, "version", "", "the version stamped into the binaries")
	fs.StringVar(&b.Commit, "commit", "", "the commit stamped into the binaries")
	fs.Int64Var(&epoch, "date", 0, "the commit time, seconds since 1970 (SOURCE_DATE_EPOCH)")
	fs.StringVar(&b.BinDir, "bin", "bin", "directory of gorping-linux-<arch>")
	fs.StringVar(&b.Man, "man", "bin/gorping.1", "the roff man page")
	fs.StringVar(&b.Completion, "completions", "bin/completion", "directory of the completion scripts")
	fs.StringVar(&b.License, "license", "LICENSE", "the license file")
	fs.StringVar(&b.Maintainer, "maintainer", Maintainer, "the packages' maintainer (make package MAINTAINER='Name <address>')")
	fs.StringVar(&b.Out, "out", "bin/release", "output directory")
	layoutDir := fs.String("layout", "", "unpack: the OCI image layout directory")
	arch := fs.String("arch", "amd64", "unpack: the platform's architecture")
	fs.Parse(os.Args[2:])
	b.Date = time.Unix(epoch, 0).UTC()

	var err error
	switch os.Args[1] {
	case "package":
		err = needed(b, epoch)
		if err == nil {
			var files []string
			files, err = Packages(b)
			for _, f := range files {
				fmt.Println(f)
			}
		}
	case "image":
		err = needed(b, epoch)
		if err == nil {
			var dir, archive string
			dir, archive, err = Image(b)
			if err == nil {
				fmt.Println(dir)
				fmt.Println(archive)
			}
		}
	case "unpack":
		var cfg ImageConfig
		cfg, err = Unpack(*layoutDir, *arch, b.Out)
		if err == nil {
			fmt.Printf("IMAGE_ENTRYPOINT=%s\nIMAGE_USER=%s\n", shellQuote(strings.Join(cfg.Entrypoint, " ")), shellQuote(cfg.User))
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "release %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func needed(b Build, epoch int64) error {
	if b.Version == "" || b.Commit == "" || epoch == 0 {
		return fmt.Errorf("-version, -commit and -date are required (make release sets them)")
	}
	return nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release package|image|unpack [flags] (release <cmd> -h lists them)")
	os.Exit(2)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
