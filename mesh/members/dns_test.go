package members

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer answers A queries for name with n addresses (198.18.x.y, never contacted) as
// a name server does: over UDP up to 1,232 bytes, else TC and no answers (the client
// retries over TCP); over TCP up to 64 KiB, else as many records as fit and TC. AAAA:
// none.
func dnsServer(t *testing.T, name string, n int) string {
	t.Helper()
	// One port for both: the kernel's UDP port may be taken in TCP; try another.
	var udp net.PacketConn
	var tcp net.Listener
	for try := 0; ; try++ {
		u, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp4", u.LocalAddr().String())
		if err == nil {
			udp, tcp = u, l
			break
		}
		u.Close()
		if try == 20 {
			t.Fatalf("no port free in both UDP and TCP: %v", err)
		}
	}
	t.Cleanup(func() { udp.Close(); tcp.Close() })
	answer := func(req []byte, limit int) []byte {
		var p dnsmessage.Parser
		h, err := p.Start(req)
		if err != nil {
			return nil
		}
		q, err := p.Question()
		if err != nil {
			return nil
		}
		for k := n; ; k = k * 9 / 10 {
			b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired,
				Authoritative: true, Truncated: k < n})
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if q.Type == dnsmessage.TypeA && strings.EqualFold(q.Name.String(), name) {
				for i := range k {
					b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 30},
						dnsmessage.AResource{A: [4]byte{198, 18, byte(i >> 8), byte(i)}})
				}
			}
			msg, err := b.Finish()
			if err != nil {
				t.Error(err)
				return nil
			}
			if len(msg) <= limit {
				return msg
			}
			if limit < maxMessage {
				k = 0 // UDP: TC and nothing, as servers do
				hb := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Truncated: true})
				hb.StartQuestions()
				hb.Question(q)
				msg, _ = hb.Finish()
				return msg
			}
		}
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			if msg := answer(buf[:n], 1232); msg != nil {
				udp.WriteTo(msg, from)
			}
		}
	}()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var l [2]byte
					if _, err := io.ReadFull(c, l[:]); err != nil {
						return
					}
					req := make([]byte, binary.BigEndian.Uint16(l[:]))
					if _, err := io.ReadFull(c, req); err != nil {
						return
					}
					msg := answer(req, maxMessage)
					out := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
					if _, err := c.Write(append(out, msg...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return udp.LocalAddr().String()
}

// A headless Service's answer that fits is read whole, silently; one of 10,000 agents is
// cut by the server at 64 KiB: the lookup still gives what came (about 4,000), and DNS
// says once that agents are missing and what to use instead.
func TestDNSCut(t *testing.T) {
	for _, tc := range []struct {
		n   int
		cut bool
	}{{3, false}, {200, false}, {10000, true}} {
		const name = "gorping-mesh.gorping.svc.cluster.local."
		server := dnsServer(t, name, tc.n)
		var log syncLog
		d := NewDNS(slog.New(slog.NewTextHandler(&log, nil)), "--agents-dns", "--agents.kubernetes", server)
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			addrs, err := d.LookupNetIP(ctx, "ip", name)
			cancel()
			if err != nil {
				t.Fatalf("%d agents: %v", tc.n, err)
			}
			if !tc.cut && len(addrs) != tc.n || tc.cut && (len(addrs) >= tc.n || len(addrs) < 3000) {
				t.Errorf("%d agents: %d addresses", tc.n, len(addrs))
			}
			if d.Cut() != tc.cut {
				t.Errorf("%d agents (%d answered): Cut %v, want %v", tc.n, len(addrs), d.Cut(), tc.cut)
			}
		}
		want := 0
		if tc.cut {
			want = 1
		}
		if n := log.count("cut at the DNS message limit"); n != want || tc.cut && log.count("instead=--agents.kubernetes") != 1 {
			t.Errorf("%d agents: said %d times over two lookups, want %d:\n%s", tc.n, n, want, log.String())
		}
		t.Logf("%d agents: %s", tc.n, strings.TrimSpace(log.String()))
	}
}
