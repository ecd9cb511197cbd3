package main

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the packagers
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm"
)

// Package formats and where each puts the zsh completion (Debian's vendor directory;
// Fedora's packages use site-functions).
var formats = []struct {
	name   string
	zshDir string
}{
	{"deb", "/usr/share/zsh/vendor-completions"},
	{"rpm", "/usr/share/zsh/site-functions"},
}

// UnitDir is where both formats put the systemd unit: /usr/lib/systemd/system, lintian's
// canonical place. Not /lib: on a merged-/usr system /lib is a symlink no package owns,
// and removing a package that listed /lib made dpkg remove the symlink (the guest test
// lost its dynamic loader that way).
const UnitDir = "/usr/lib/systemd/system"

// The agent's service: the unit, its options (a conffile) and its targets file (a
// conffile the admin fills in), so `systemctl enable --now gorping-mesh` works as
// installed.
var (
	//go:embed files/gorping-mesh.service
	meshUnit []byte
	//go:embed files/gorping-mesh.default
	meshDefault []byte
	//go:embed files/targets
	meshTargets []byte
	// The .deb's maintainer scripts: gorping-mesh.service as a Debian service package
	// handles it (files/deb/postinst says the policy: not enabled, not started on install).
	//go:embed files/deb/postinst
	debPostinst []byte
	//go:embed files/deb/prerm
	debPrerm []byte
	//go:embed files/deb/postrm
	debPostrm []byte
)

const (
	MeshUnit     = "gorping-mesh.service"
	MeshDefaults = "/etc/default/gorping-mesh"
	MeshTargets  = "/etc/gorping/targets"
)

// Packages writes a .deb and an .rpm per architecture into b.Out and returns their paths.
func Packages(b Build) ([]string, error) {
	if err := os.MkdirAll(b.Out, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "gorping-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	// Debian wants man pages and changelogs gzip'd (-9n: no name, no time stamp).
	man, err := gzipFile(b.Man, filepath.Join(work, "gorping.1.gz"))
	if err != nil {
		return nil, err
	}
	copyright := filepath.Join(work, "copyright")
	if err := writeCopyright(b.License, copyright); err != nil {
		return nil, err
	}
	changelog := filepath.Join(work, "changelog.gz")
	if err := writeGzip(changelog, []byte(debChangelog(b))); err != nil {
		return nil, err
	}
	overrides := filepath.Join(work, "lintian-overrides")
	if err := os.WriteFile(overrides, []byte(lintianOverrides), 0o644); err != nil {
		return nil, err
	}
	service := map[string]string{}
	for name, data := range map[string][]byte{"unit": meshUnit, "default": meshDefault, "targets": meshTargets,
		"postinst": debPostinst, "prerm": debPrerm, "postrm": debPostrm} {
		service[name] = filepath.Join(work, name)
		if err := os.WriteFile(service[name], data, 0o644); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, arch := range Arches {
		for _, f := range formats {
			contents := files.Contents{
				{Source: b.Binary(arch), Destination: "/usr/bin/gorping", FileInfo: mode(0o755, b)},
				{Source: man, Destination: "/usr/share/man/man1/gorping.1.gz", FileInfo: mode(0o644, b)},
				{Source: filepath.Join(b.Completion, "gorping.bash"), Destination: "/usr/share/bash-completion/completions/gorping", FileInfo: mode(0o644, b)},
				{Source: filepath.Join(b.Completion, "_gorping"), Destination: f.zshDir + "/_gorping", FileInfo: mode(0o644, b)},
				{Source: filepath.Join(b.Completion, "gorping.fish"), Destination: "/usr/share/fish/vendor_completions.d/gorping.fish", FileInfo: mode(0o644, b)},
				{Source: service["unit"], Destination: UnitDir + "/" + MeshUnit, FileInfo: mode(0o644, b)},
				// Configuration: kept on upgrade when the admin changed it (deb conffiles,
				// rpm %config(noreplace)).
				{Source: service["default"], Destination: MeshDefaults, Type: files.TypeConfigNoReplace, FileInfo: mode(0o644, b)},
				{Source: service["targets"], Destination: MeshTargets, Type: files.TypeConfigNoReplace, FileInfo: mode(0o644, b)},
			}
			if f.name == "deb" {
				contents = append(contents,
					&files.Content{Source: copyright, Destination: "/usr/share/doc/gorping/copyright", FileInfo: mode(0o644, b)},
					&files.Content{Source: changelog, Destination: "/usr/share/doc/gorping/changelog.Debian.gz", FileInfo: mode(0o644, b)},
					&files.Content{Source: overrides, Destination: "/usr/share/lintian/overrides/gorping", FileInfo: mode(0o644, b)})
			} else {
				contents = append(contents, &files.Content{Source: b.License, Destination: "/usr/share/licenses/gorping/LICENSE", FileInfo: mode(0o644, b)})
			}
			var scripts nfpm.Scripts
			if f.name == "deb" {
				scripts = nfpm.Scripts{PostInstall: service["postinst"], PreRemove: service["prerm"], PostRemove: service["postrm"]}
			}
			p, err := writePackage(b, arch, f.name, contents, scripts)
			if err != nil {
				return out, fmt.Errorf("%s %s: %w", f.name, arch, err)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func mode(m os.FileMode, b Build) *files.ContentFileInfo {
	return &files.ContentFileInfo{Mode: m, MTime: b.Date, Owner: "root", Group: "root"}
}

func writePackage(b Build, arch, format string, contents files.Contents, scripts nfpm.Scripts) (string, error) {
	info := &nfpm.Info{
		Name:        "gorping",
		Arch:        arch,
		Platform:    "linux",
		Version:     b.Version,
		Release:     "1",
		Section:     "net",
		Priority:    "optional",
		Maintainer:  b.Maintainer,
		Description: summary + "\n" + description,
		Vendor:      "gorping",
		Homepage:    homepage,
		License:     "MIT",
		MTime:       b.Date,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts:  scripts,
			RPM: nfpm.RPM{
				Summary:   summary,
				Group:     "Applications/System",
				BuildHost: "gorping-release", // not this machine's name: the same inputs, the same package
			},
		},
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", err
	}
	pkg, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	path := filepath.Join(b.Out, pkg.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

func gzipFile(src, dst string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	return dst, writeGzip(dst, b)
}

// writeGzip compresses like gzip -9n: best compression, no name, no time stamp.
func writeGzip(dst string, b []byte) error {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// writeCopyright turns the license into Debian's machine-readable copyright file.
func writeCopyright(license, dst string) error {
	text, err := os.ReadFile(license)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	holder := "The gorping authors"
	for _, l := range lines {
		if c, ok := strings.CutPrefix(l, "Copyright (c) "); ok {
			holder = c
		}
	}
	var body strings.Builder
	for _, l := range lines {
		if l == "" {
			body.WriteString(" .\n")
		} else {
			body.WriteString(" " + l + "\n")
		}
	}
	doc := "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n" +
		"Upstream-Name: gorping\n" +
		"Source: " + homepage + "\n\n" +
		"Files: *\n" +
		"Copyright: " + holder + "\n" +
		"License: Expat\n" + body.String()
	return os.WriteFile(dst, []byte(doc), 0o644)
}

// lintianOverrides are the lintian tags that are gorping's design, with the reasons.
const lintianOverrides = `# gorping is one static Go binary on purpose (CGO_ENABLED=0): no rdma-core, no libc.
gorping: statically-linked-binary [usr/bin/gorping]
# Built from upstream source, not uploaded to Debian: there is no bug to close.
gorping: initial-upload-closes-no-bugs [usr/share/doc/gorping/changelog.Debian.gz:1]
`

// debChangelog is the one entry Debian policy asks of a binary package built from
// upstream source: which version, from which commit.
func debChangelog(b Build) string {
	return fmt.Sprintf("gorping (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n",
		DebVersion(b.Version), b.Commit, b.Maintainer, b.Date.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
}

// DebVersion is the Debian version nfpm makes of a Go version: without the "v", the
// pre-release after "~" (so it sorts before the release), metadata after "+", and the
// package release "-1".
func DebVersion(v string) string {
	core, meta, _ := strings.Cut(strings.TrimPrefix(v, "v"), "+")
	core, pre, hasPre := strings.Cut(core, "-")
	s := core
	if hasPre {
		s += "~" + pre
	}
	if meta != "" {
		s += "+" + meta
	}
	return s + "-1"
}

// RPMVersion is the RPM version and release nfpm makes of a Go version: the pre-release
// after "~" with its "-" turned into "_" (RPM versions have no "-"), release "1".
func RPMVersion(v string) (version, release string) {
	core, meta, _ := strings.Cut(strings.TrimPrefix(v, "v"), "+")
	core, pre, hasPre := strings.Cut(core, "-")
	s := core
	if hasPre {
		s += "~" + strings.ReplaceAll(pre, "-", "_")
	}
	if meta != "" {
		s += "+" + meta
	}
	return s, "1"
}
