package vm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Mirrors are the two Debian archives packages are fetched from. The test bed never
// names a mirror itself: it reuses whatever the host's apt is configured with, so it
// works behind the same proxies and snapshot mirrors as the rest of the machine.
type Mirrors struct {
	Main     string // the archive whose URI path ends in /debian
	Security string // the archive whose URI path ends in /debian-security
}

// Environment variables that override what the host's apt sources say.
const (
	EnvMirror         = "GORPING_DEBIAN_MIRROR"
	EnvSecurityMirror = "GORPING_DEBIAN_SECURITY_MIRROR"
)

// HostMirrors finds the Debian archives in the host's apt configuration
// (/etc/apt/sources.list and /etc/apt/sources.list.d/*.{list,sources}); the
// environment variables EnvMirror and EnvSecurityMirror win over it.
func HostMirrors() (Mirrors, error) {
	var uris []string
	files := []string{"/etc/apt/sources.list"}
	if more, err := filepath.Glob("/etc/apt/sources.list.d/*"); err == nil {
		sort.Strings(more)
		files = append(files, more...)
	}
	for _, f := range files {
		var parse func(io.Reader) []string
		switch {
		case strings.HasSuffix(f, ".sources"):
			parse = ParseDeb822URIs
		case strings.HasSuffix(f, ".list"):
			parse = ParseListURIs
		default:
			continue // e.g. "*.disabled": apt ignores those too
		}
		fh, err := os.Open(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return Mirrors{}, fmt.Errorf("read apt sources: %w", err)
		}
		uris = append(uris, parse(fh)...)
		fh.Close()
	}
	return PickMirrors(uris, os.Getenv(EnvMirror), os.Getenv(EnvSecurityMirror))
}

// PickMirrors chooses the main and security archive among uris (first match wins);
// a non-empty override replaces the corresponding choice.
func PickMirrors(uris []string, mainOverride, secOverride string) (Mirrors, error) {
	var m Mirrors
	for _, u := range uris {
		u = strings.TrimRight(u, "/")
		switch {
		case m.Main == "" && strings.HasSuffix(u, "/debian"):
			m.Main = u
		case m.Security == "" && strings.HasSuffix(u, "/debian-security"):
			m.Security = u
		}
	}
	if mainOverride != "" {
		m.Main = strings.TrimRight(mainOverride, "/")
	}
	if secOverride != "" {
		m.Security = strings.TrimRight(secOverride, "/")
	}
	switch {
	case m.Main == "":
		return m, fmt.Errorf("no Debian archive (a URI ending in /debian) in the host's apt sources; set %s", EnvMirror)
	case m.Security == "":
		return m, fmt.Errorf("no Debian security archive (a URI ending in /debian-security) in the host's apt sources; set %s", EnvSecurityMirror)
	}
	return m, nil
}

// ParseDeb822URIs returns the URIs of the enabled "deb" stanzas of a deb822
// .sources file. Stanzas are separated by blank lines; "Enabled: no" and stanzas
// whose Types lack "deb" (e.g. deb-src only) are skipped.
func ParseDeb822URIs(r io.Reader) []string {
	var out []string
	fields := map[string]string{}
	flush := func() {
		enabled := !strings.EqualFold(fields["enabled"], "no")
		isDeb := false
		for _, t := range strings.Fields(fields["types"]) {
			isDeb = isDeb || t == "deb"
		}
		if enabled && isDeb {
			out = append(out, strings.Fields(fields["uris"])...)
		}
		fields = map[string]string{}
	}
	last := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t': // continuation of the previous field
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}

// ParseListURIs returns the URIs of the "deb" lines of a one-line-style
// sources.list ("deb [options] uri suite components...").
func ParseListURIs(r io.Reader) []string {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options may contain spaces: skip to "]"
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}
