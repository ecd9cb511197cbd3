// Package target is what the mesh agent probes: a host and port (Target), where it came
// from, and its parsing (a target, a target file, a comma list) and resolution. Every
// source of targets and agents parses here; the prober, discovery and /probe take it.
package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Target is one rping server to probe: a host name or address literal and a port.
type Target struct {
	Host   string // as given: "node1", "192.0.2.1", "2001:db8::1" (no brackets)
	Port   uint16
	Source string // where it came from: SourceFile, SourcePeers, SourceDNS, SourceRails

	// A rail target (SourceRails, from a peer's description) is probed from the local
	// rail Device/DevPort, leaving from its address Src; Peer is the peer agent's name.
	// Direct targets have none of these: the route picks the device.
	Src     netip.Addr
	Device  string
	DevPort int
	Peer    string
}

// Target sources, the values of the source label.
const (
	SourceFile  = "file"
	SourcePeers = "peers"
	SourceDNS   = "dns"
	SourceRails = "rails" // a peer agent's rail, paired with a local one (agentdesc.Pair)

	// Sources of agents (gorping_target_config_errors_total's source label).
	SourceAgentsFile = "agents_file"
	SourceAgentsDNS  = "agents_dns"
)

// Key is the target's label value: host:port, IPv6 in brackets ("[2001:db8::1]:7174").
func (t Target) Key() string { return net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port))) }

// ID tells the agent's targets apart: the key, and for a rail target also the local
// rail and the peer (with --rails all, two local rails probe one peer address).
func (t Target) ID() string {
	if t.Device == "" {
		return t.Key()
	}
	return t.Key() + " " + t.Device + "/" + strconv.Itoa(t.DevPort) + " " + t.Peer
}

// Addr returns the target's address if its host is an address literal.
func (t Target) Addr() (netip.Addr, bool) {
	a, err := netip.ParseAddr(t.Host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Parse parses "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 literal;
// a missing port is defaultPort. Hosts are address literals or DNS names.
func Parse(s string, defaultPort uint16) (Target, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Target{}, errors.New("empty target")
	}
	host, port := s, defaultPort
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Target{}, fmt.Errorf("target %s: missing ']'", Quote(s))
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return Target{}, fmt.Errorf("target %s: junk after ']'", Quote(s))
			}
			p, err := ParsePort(rest[1:])
			if err != nil {
				return Target{}, fmt.Errorf("target %s: %w", Quote(s), err)
			}
			port = p
		}
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
			return Target{}, fmt.Errorf("target %s: not an IPv6 address in brackets", Quote(s))
		}
	case strings.Count(s, ":") > 1: // a bare IPv6 literal, no port
		if _, err := netip.ParseAddr(s); err != nil {
			return Target{}, fmt.Errorf("target %s: not an IPv6 address (write [address]:port)", Quote(s))
		}
	case strings.Contains(s, ":"):
		h, p, _ := strings.Cut(s, ":")
		pp, err := ParsePort(p)
		if err != nil {
			return Target{}, fmt.Errorf("target %s: %w", Quote(s), err)
		}
		host, port = h, pp
	}
	// "192.0.2.1." is the address, not a name: the trailing dot a name may carry would
	// otherwise turn it into one that skips the address checks.
	if h := strings.TrimSuffix(host, "."); h != host {
		if _, err := netip.ParseAddr(h); err == nil {
			host = h
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Target{}, fmt.Errorf("target %s: zoned addresses are not supported", Quote(s))
		}
		if a.IsUnspecified() || a.IsMulticast() {
			return Target{}, fmt.Errorf("target %s: %s is not a host address", Quote(s), a)
		}
		return Target{Host: a.Unmap().String(), Port: port}, nil
	}
	if !ValidHostname(host) {
		return Target{}, fmt.Errorf("target %s: neither an address nor a host name", Quote(s))
	}
	return Target{Host: strings.ToLower(strings.TrimSuffix(host, ".")), Port: port}, nil
}

// Quote quotes s for an error message, cut to 64 bytes: errors echo their input, and
// input can be anything (a 1 MiB file line, a 6 KB /probe query).
func Quote(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:most]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// ParsePort parses a port, 1..65535.
func ParsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad port %s (1..65535)", Quote(s))
	}
	return uint16(n), nil
}

// ValidHostname accepts DNS names: dot-separated labels of letters, digits, '-' and
// '_' (Kubernetes service names), none empty or over 63 bytes, at most 253 in all.
func ValidHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// LineError is a target file line that does not parse.
type LineError struct {
	Line int
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// maxLineBytes bounds a target file line: a target is at most 253+6 bytes, and a line
// with a comment rarely passes 200. A longer line is one bad line, skipped unread.
const maxLineBytes = 4096

// ParseFile parses a target file: one host[:port] per line, '#' starts a comment
// (at the start of a line or after white space), blank lines are ignored. It returns the
// targets that parse (each once, in file order) and an error per line that does not;
// every other line applies, whatever a bad one holds.
func ParseFile(data []byte, defaultPort uint16) ([]Target, []LineError) {
	var ts []Target
	var errs []LineError
	seen := map[string]bool{}
	for n := 1; len(data) > 0; n++ {
		raw := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(raw) > maxLineBytes {
			errs = append(errs, LineError{n, fmt.Errorf("longer than %d bytes (%d)", maxLineBytes, len(raw))})
			continue
		}
		line := string(raw)
		if i := commentStart(line); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			errs = append(errs, LineError{n, fmt.Errorf("%s: one target per line", Quote(line))})
			continue
		}
		t, err := Parse(line, defaultPort)
		if err != nil {
			errs = append(errs, LineError{n, err})
			continue
		}
		t.Source = SourceFile
		if !seen[t.Key()] {
			seen[t.Key()] = true
			ts = append(ts, t)
		}
	}
	return ts, errs
}

func commentStart(line string) int {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return i
		}
	}
	return -1
}

// ParseList parses --peers: comma-separated targets.
func ParseList(s string, defaultPort uint16) ([]Target, error) {
	var ts []Target
	var errs []error
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		t, err := Parse(f, defaultPort)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.Source = SourcePeers
		ts = append(ts, t)
	}
	return ts, errors.Join(errs...)
}

// Resolver is what the agent needs of DNS (*net.Resolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ResolveDNS resolves the --targets-dns name (A and AAAA) into address targets on port.
func ResolveDNS(ctx context.Context, r Resolver, name string, port uint16) ([]Target, error) {
	addrs, err := r.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, err
	}
	// In address order: DNS answers come in any order, and the order decides which
	// targets --max-targets keeps.
	as := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		as = append(as, a.Unmap().WithZone(""))
	}
	slices.SortFunc(as, netip.Addr.Compare)
	as = slices.Compact(as)
	ts := make([]Target, 0, len(as))
	for _, a := range as {
		ts = append(ts, Target{Host: a.String(), Port: port, Source: SourceDNS})
	}
	return ts, nil
}

// Resolve returns the address to dial for t: the literal, or the first address DNS
// gives for its name.
func Resolve(ctx context.Context, r Resolver, t Target) (netip.Addr, error) {
	if a, ok := t.Addr(); ok {
		return a, nil
	}
	addrs, err := r.LookupNetIP(ctx, "ip", t.Host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("%s has no address", t.Host)
	}
	return addrs[0].Unmap(), nil
}
