//go:build guest

package guest

// A tiny DNS server for the guest, which has no resolver: with no
// /etc/resolv.conf both glibc's getaddrinfo (stock rping) and Go's resolver
// (gorping) ask 127.0.0.1:53 (Go also [::1]:53). Serving there lets the tests
// make a name resolve, or fail with NXDOMAIN ("Name or service not known")
// instead of the "Temporary failure" of an unreachable resolver.

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

const (
	dnsTypeA    = 1
	dnsTypeAAAA = 28
)

// startFakeDNS answers A/AAAA queries for the names in answers (lower case,
// no trailing dot) and NXDOMAIN for every other name, until the test ends.
func startFakeDNS(t *testing.T, answers map[string]netip.Addr) {
	t.Helper()
	served := 0
	for _, addr := range []string{"127.0.0.1:53", "[::1]:53"} {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Logf("fake DNS: cannot serve on %s: %v", addr, err)
			continue
		}
		served++
		t.Cleanup(func() { pc.Close() })
		go serveDNS(pc, answers)
	}
	if served == 0 {
		t.Fatalf("fake DNS: could not listen on 127.0.0.1:53 nor [::1]:53")
	}
}

func serveDNS(pc net.PacketConn, answers map[string]netip.Addr) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if resp := dnsAnswer(buf[:n], answers); resp != nil {
			pc.WriteTo(resp, from)
		}
	}
}

// dnsAnswer builds the response to one query (RFC 1035 §4.1), or nil if the
// packet is not a query it understands.
func dnsAnswer(q []byte, answers map[string]netip.Addr) []byte {
	if len(q) < 12 || q[2]&0x80 != 0 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// The question: labels up to the root label, then QTYPE and QCLASS.
	off := 12
	var labels []string
	for {
		if off >= len(q) {
			return nil
		}
		l := int(q[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[off:off+l]))
		off += l
	}
	if off+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[off:])
	qend := off + 4
	name := strings.ToLower(strings.Join(labels, "."))

	resp := make([]byte, 0, qend+28)
	resp = append(resp, q[0:2]...) // ID
	// QR, AA, the query's RD, RA; RCODE below.
	flags := uint16(0x8000|0x0400|0x0080) | uint16(q[2]&0x01)<<8
	addr, known := answers[name]
	var rdata []byte
	switch {
	case !known:
		flags |= 3 // NXDOMAIN
	case qtype == dnsTypeA && addr.Is4():
		a := addr.As4()
		rdata = a[:]
	case qtype == dnsTypeAAAA && addr.Is6():
		a := addr.As16()
		rdata = a[:]
	}
	resp = binary.BigEndian.AppendUint16(resp, flags)
	resp = binary.BigEndian.AppendUint16(resp, 1) // QDCOUNT
	ancount := uint16(0)
	if rdata != nil {
		ancount = 1
	}
	resp = binary.BigEndian.AppendUint16(resp, ancount)
	resp = binary.BigEndian.AppendUint16(resp, 0) // NSCOUNT
	resp = binary.BigEndian.AppendUint16(resp, 0) // ARCOUNT (no EDNS echo)
	resp = append(resp, q[12:qend]...)
	if rdata != nil {
		resp = append(resp, 0xc0, 12) // name: pointer to the question's
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
		resp = binary.BigEndian.AppendUint32(resp, 60)
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
		resp = append(resp, rdata...)
	}
	return resp
}
