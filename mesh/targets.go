package mesh

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// target is one rping server to probe: a host name or address literal and a port.
type target struct {
	Host   string // as given: "node1", "192.0.2.1", "2001:db8::1" (no brackets)
	Port   uint16
	Source string // where it came from: sourceFile, sourcePeers, sourceDNS
}

// Target sources, the values of the source label.
const (
	sourceFile  = "file"
	sourcePeers = "peers"
	sourceDNS   = "dns"
)

// Key is the target's label value: host:port, IPv6 in brackets ("[2001:db8::1]:7174").
func (t target) Key() string { return net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port))) }

// Addr returns the target's address if its host is an address literal.
func (t target) Addr() (netip.Addr, bool) {
	a, err := netip.ParseAddr(t.Host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// parseTarget parses "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 literal;
// a missing port is defaultPort. Hosts are address literals or DNS names.
func parseTarget(s string, defaultPort uint16) (target, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return target{}, errors.New("empty target")
	}
	host, port := s, defaultPort
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return target{}, fmt.Errorf("target %q: missing ']'", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return target{}, fmt.Errorf("target %q: junk after ']'", s)
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return target{}, fmt.Errorf("target %q: %w", s, err)
			}
			port = p
		}
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
			return target{}, fmt.Errorf("target %q: %q is not an IPv6 address", s, host)
		}
	case strings.Count(s, ":") > 1: // a bare IPv6 literal, no port
		if _, err := netip.ParseAddr(s); err != nil {
			return target{}, fmt.Errorf("target %q: not an IPv6 address (write [address]:port)", s)
		}
	case strings.Contains(s, ":"):
		h, p, _ := strings.Cut(s, ":")
		pp, err := parsePort(p)
		if err != nil {
			return target{}, fmt.Errorf("target %q: %w", s, err)
		}
		host, port = h, pp
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return target{}, fmt.Errorf("target %q: zoned addresses are not supported", s)
		}
		if a.IsUnspecified() || a.IsMulticast() {
			return target{}, fmt.Errorf("target %q: %s is not a host address", s, a)
		}
		return target{Host: a.Unmap().String(), Port: port}, nil
	}
	if !validHostname(host) {
		return target{}, fmt.Errorf("target %q: %q is neither an address nor a host name", s, host)
	}
	return target{Host: strings.ToLower(strings.TrimSuffix(host, ".")), Port: port}, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad port %q (1..65535)", s)
	}
	return uint16(n), nil
}

// validHostname accepts DNS names: dot-separated labels of letters, digits, '-' and
// '_' (Kubernetes service names), none empty or over 63 bytes, at most 253 in all.
func validHostname(h string) bool {
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

// lineError is a target file line that does not parse.
type lineError struct {
	Line int
	Err  error
}

func (e lineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// parseTargetFile parses a target file: one host[:port] per line, '#' starts a comment
// (at the start of a line or after white space), blank lines are ignored. It returns the
// targets that parse (each once, in file order) and an error per line that does not.
func parseTargetFile(data []byte, defaultPort uint16) ([]target, []lineError) {
	var ts []target
	var errs []lineError
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := commentStart(line); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			errs = append(errs, lineError{n, fmt.Errorf("%q: one target per line", line)})
			continue
		}
		t, err := parseTarget(line, defaultPort)
		if err != nil {
			errs = append(errs, lineError{n, err})
			continue
		}
		t.Source = sourceFile
		if !seen[t.Key()] {
			seen[t.Key()] = true
			ts = append(ts, t)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, lineError{0, err})
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

// parsePeers parses --peers: comma-separated targets.
func parsePeers(s string, defaultPort uint16) ([]target, error) {
	var ts []target
	var errs []error
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		t, err := parseTarget(f, defaultPort)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.Source = sourcePeers
		ts = append(ts, t)
	}
	return ts, errors.Join(errs...)
}

// dnsResolver is what the agent needs of DNS (*net.dnsResolver).
type dnsResolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolveDNS resolves the --targets-dns name (A and AAAA) into address targets on port.
func resolveDNS(ctx context.Context, r dnsResolver, name string, port uint16) ([]target, error) {
	addrs, err := r.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, err
	}
	seen := map[netip.Addr]bool{}
	var ts []target
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if seen[a] {
			continue
		}
		seen[a] = true
		ts = append(ts, target{Host: a.String(), Port: port, Source: sourceDNS})
	}
	return ts, nil
}

// resolveTarget returns the address to dial for t: the literal, or the first address DNS
// gives for its name.
func resolveTarget(ctx context.Context, r dnsResolver, t target) (netip.Addr, error) {
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

// localAddrs is the set of this host's interface addresses, for skipping itself.
func localAddrs() map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return m
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			m[p.Addr().Unmap()] = true
		}
	}
	return m
}
