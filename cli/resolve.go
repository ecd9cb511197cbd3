package cli

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// resolver turns an -a/-I argument into an address the way rping's
// getaddrinfo(addr, NULL, NULL) does, returning 0 or a negative EAI code.
type resolver func(ctx context.Context, host string) (netip.Addr, int)

// resolveHost is getaddrinfo(host, NULL, NULL)'s first result: numeric IPv4 in
// every inet_aton form ("127.1", "0x7f.0.0.1"), numeric IPv6 (with %scope),
// then a name lookup through Go's resolver (/etc/hosts, DNS).
func resolveHost(ctx context.Context, host string) (netip.Addr, int) {
	return resolveWith(ctx, host, net.DefaultResolver.LookupNetIP)
}

// resolveWith is resolveHost with the name lookup as a parameter, for tests.
func resolveWith(ctx context.Context, host string, lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)) (netip.Addr, int) {
	if a, ok := parseInetAton(host); ok {
		return a, 0
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return numericZone(a)
	}
	if host == "" {
		return netip.Addr{}, eaiNoName
	}
	addrs, err := lookup(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, eaiCode(err)
	}
	if len(addrs) == 0 {
		return netip.Addr{}, eaiNoData
	}
	// Go hands A records out as IPv4-mapped IPv6; getaddrinfo gives AF_INET.
	return addrs[0].Unmap(), 0
}

// numericZone rewrites an interface-name scope ("fe80::1%eth0") to the
// interface index getaddrinfo puts into sin6_scope_id ("fe80::1%2"), so the
// zone of a resolved address is always numeric. Unknown names fail as in glibc.
func numericZone(a netip.Addr) (netip.Addr, int) {
	z := a.Zone()
	if z == "" || strings.Trim(z, "0123456789") == "" {
		return a, 0
	}
	ifi, err := net.InterfaceByName(z)
	if err != nil {
		return netip.Addr{}, eaiNoName
	}
	return a.WithZone(strconv.Itoa(ifi.Index)), 0
}

// eaiCode maps a Go resolver error to the EAI code glibc would have returned.
func eaiCode(err error) int {
	var de *net.DNSError
	if errors.As(err, &de) {
		switch {
		case de.IsNotFound:
			return eaiNoName
		case de.IsTimeout, de.IsTemporary:
			return eaiAgain
		}
		return eaiFail
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return eaiAgain
	}
	return eaiFail
}

// parseInetAton parses an IPv4 address the way glibc's getaddrinfo does for
// numeric hosts (inet_aton, whole string): one to four parts separated by dots,
// each a C integer literal (decimal, 0-prefixed octal, 0x hex); all parts but
// the last are one byte, the last fills the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for {
		if n == len(parts) {
			return netip.Addr{}, false
		}
		part, rest, more := strings.Cut(s, ".")
		v, ok := parseCUint(part)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if !more {
			break
		}
		s = rest
	}
	var ip uint32
	for i := 0; i < n-1; i++ {
		if parts[i] > 0xff {
			return netip.Addr{}, false
		}
		ip |= uint32(parts[i]) << (24 - 8*i)
	}
	last := parts[n-1]
	if last > 0xffffffff>>(8*(n-1)) {
		return netip.Addr{}, false
	}
	ip |= uint32(last)
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

// parseCUint parses all of s as a non-negative C integer literal as strtoul(s,
// &end, 0) would, requiring a leading digit and end at the end of s. Values
// beyond 32 bits fail.
func parseCUint(s string) (uint64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hexDigit(s[2]) >= 0:
		base, s = 16, s[2:]
	case s[0] == '0':
		base = 8
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := hexDigit(s[i])
		if d < 0 || uint64(d) >= base {
			return 0, false
		}
		v = v*base + uint64(d)
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
