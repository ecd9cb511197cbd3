package vm

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// fakeGuest is one switch port's far end: a UDP socket where QEMU's dgram
// netdev would be.
type fakeGuest struct {
	conn *net.UDPConn
	sw   *net.UDPAddr
	mac  [6]byte
}

func fakeGuests(t *testing.T, s *Switch) []*fakeGuest {
	t.Helper()
	var gs []*fakeGuest
	for i, p := range s.ports {
		c, err := net.ListenUDP("udp4", p.guest)
		if err != nil {
			t.Fatalf("guest %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		gs = append(gs, &fakeGuest{conn: c, sw: p.conn.LocalAddr().(*net.UDPAddr), mac: [6]byte{2, 0, 0, 0, 0, byte(i + 1)}})
	}
	// Each says something once (a broadcast), so the switch learns its MAC, and
	// the others drain it.
	for _, g := range gs {
		g.send(t, frame([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, g.mac, 0x0806, nil))
	}
	for i, g := range gs {
		for range len(gs) - 1 {
			if _, ok := g.recv(t, time.Second); !ok {
				t.Fatalf("guest %d did not get the others' broadcasts", i)
			}
		}
	}
	return gs
}

func (g *fakeGuest) send(t *testing.T, f []byte) {
	t.Helper()
	if _, err := g.conn.WriteToUDP(f, g.sw); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// recv returns the next frame within d, or false.
func (g *fakeGuest) recv(t *testing.T, d time.Duration) ([]byte, bool) {
	t.Helper()
	buf := make([]byte, 2048)
	g.conn.SetReadDeadline(time.Now().Add(d))
	n, _, err := g.conn.ReadFromUDP(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return buf[:n], true
}

func frame(dst, src [6]byte, ethertype uint16, payload []byte) []byte {
	f := append(append(dst[:], src[:]...), byte(ethertype>>8), byte(ethertype))
	return append(f, payload...)
}

// roceFrame is a RoCEv2 frame over IPv4 (v6 false) or IPv6 with a BTH naming dqpn.
func roceFrame(dst, src [6]byte, v6 bool, sport uint16, dqpn uint32) []byte {
	udp := make([]byte, 8+12+4) // UDP, BTH, ICRC
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], 4791)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	bth := udp[8:]
	bth[0] = 0x04 // RC SEND only
	bth[5], bth[6], bth[7] = byte(dqpn>>16), byte(dqpn>>8), byte(dqpn)
	if v6 {
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(udp)))
		ip[6], ip[7] = 17, 64
		return frame(dst, src, 0x86dd, append(ip, udp...))
	}
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	ip[8], ip[9] = 64, 17
	return frame(dst, src, 0x0800, append(ip, udp...))
}

// flowsOn returns n (sport, dqpn) pairs that hash onto member m of k, and n
// that do not.
func flowsOn(m, k, n int) (on, off [][2]uint32) {
	for sp := uint32(49152); len(on) < n || len(off) < n; sp++ {
		f := [2]uint32{sp, 17 + sp%977}
		if ECMPMember(uint16(f[0]), f[1], k) == m {
			if len(on) < n {
				on = append(on, f)
			}
		} else if len(off) < n {
			off = append(off, f)
		}
	}
	return on, off
}

func TestECMPMemberSpreads(t *testing.T) {
	const k = 4
	seen := make([]int, k)
	for sp := 49152; sp < 49152+4000; sp++ {
		m := ECMPMember(uint16(sp), uint32(sp*7)&0xffffff, k)
		if m != ECMPMember(uint16(sp), uint32(sp*7)&0xffffff, k) {
			t.Fatal("ECMPMember is not a function of the flow")
		}
		seen[m]++
	}
	for m, n := range seen {
		if n < 700 || n > 1300 {
			t.Errorf("member %d got %d of 4000 flows, want about 1000: %v", m, n, seen)
		}
	}
	// The destination QP alone moves a flow: what several QPs per connection rely on.
	moved := 0
	for q := uint32(100); q < 200; q++ {
		if ECMPMember(50000, q, k) != ECMPMember(50000, 100, k) {
			moved++
		}
	}
	if moved < 50 {
		t.Errorf("only %d of 100 destination QPs with one source port left its member", moved)
	}
}

// A black-holed member discards exactly the crossing RoCEv2 flows hashed onto
// it, in both directions; the same flows between ports of one side, the other
// members' flows and frames that are not RoCEv2 pass; the counters say so.
func TestECMPBlackhole(t *testing.T) {
	s, err := NewSwitch(3, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gs := fakeGuests(t, s)
	const k, dead = 4, 2
	g, err := s.SetECMP(k, 2) // ports 0, 1 | port 2
	if err != nil {
		t.Fatal(err)
	}
	g.Impair(dead, Impairment{Blackhole: true})
	on, off := flowsOn(dead, k, 5)
	type leg struct {
		from, to int
		v6       bool
	}
	for _, l := range []leg{{0, 2, false}, {2, 0, false}, {1, 2, true}, {0, 1, false}} {
		crosses := l.from == 2 || l.to == 2
		for i, f := range append(on, off...) {
			gs[l.from].send(t, roceFrame(gs[l.to].mac, gs[l.from].mac, l.v6, uint16(f[0]), f[1]))
			want := !crosses || i >= len(on)
			got, ok := gs[l.to].recv(t, 200*time.Millisecond)
			if ok != want {
				t.Errorf("port %d -> %d, flow sport %d dqpn %d (member %d, v6 %v): delivered %v, want %v",
					l.from, l.to, f[0], f[1], ECMPMember(uint16(f[0]), f[1], k), l.v6, ok, want)
			}
			if ok {
				if sp, q, _ := roceFlow(got); sp != uint16(f[0]) || q != f[1] {
					t.Errorf("delivered flow %d/%d, sent %d/%d", sp, q, f[0], f[1])
				}
			}
		}
	}
	// ARP across the group passes.
	gs[0].send(t, frame(gs[2].mac, gs[0].mac, 0x0806, make([]byte, 28)))
	if _, ok := gs[2].recv(t, time.Second); !ok {
		t.Error("a frame that is not RoCEv2 did not cross the group")
	}
	flows := g.Flows()
	for _, f := range on {
		for _, dir := range []int{0, 1} {
			st, ok := flows[Flow{From: dir, SPort: uint16(f[0]), DQPN: f[1]}]
			// From side 0 each flow crossed twice (ports 0 and 1 to 2), from side 1 once.
			want := uint64(2 - dir)
			if !ok || st.Member != dead || st.Frames != want || st.Discarded != want {
				t.Errorf("flow %v from side %d: %+v (seen %v), want member %d, %d frames all discarded", f, dir, st, ok, dead, want)
			}
		}
	}
	for _, f := range off {
		if st := flows[Flow{From: 0, SPort: uint16(f[0]), DQPN: f[1]}]; st.Discarded != 0 || st.Member == dead {
			t.Errorf("flow %v off the dead member: %+v", f, st)
		}
	}
	if _, ok := flows[Flow{From: 0, SPort: uint16(on[0][0]), DQPN: on[0][1]}]; !ok {
		t.Error("no flow recorded")
	}
	if c, d := g.MemberFrames(dead, 0); c != 10 || d != 10 {
		t.Errorf("dead member from side 0: %d crossed, %d discarded; want 10, 10", c, d)
	}
	if c, d := g.MemberFrames(dead, 1); c != 5 || d != 5 {
		t.Errorf("dead member from side 1: %d crossed, %d discarded; want 5, 5", c, d)
	}
	// Healed, the same flows cross again.
	g.Impair(dead, Impairment{})
	gs[0].send(t, roceFrame(gs[2].mac, gs[0].mac, false, uint16(on[0][0]), on[0][1]))
	if _, ok := gs[2].recv(t, time.Second); !ok {
		t.Error("a flow of the healed member did not cross")
	}
	// No group: everything passes.
	g.Impair(dead, Impairment{Blackhole: true})
	s.SetECMP(0)
	gs[2].send(t, roceFrame(gs[0].mac, gs[2].mac, false, uint16(on[1][0]), on[1][1]))
	if _, ok := gs[0].recv(t, time.Second); !ok {
		t.Error("without a group a frame did not pass")
	}
}

func TestECMPLossAndDelay(t *testing.T) {
	s, err := NewSwitch(2, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gs := fakeGuests(t, s)
	g, err := s.SetECMP(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	on, off := flowsOn(0, 2, 1)
	g.Impair(0, Impairment{Loss: 0.5})
	const n = 400
	// One frame at a time: the member counts it, and what it did not discard
	// arrives (a burst would overflow the sockets, a loss that is not the member's).
	got := 0
	for i := range n {
		gs[0].send(t, roceFrame(gs[1].mac, gs[0].mac, false, uint16(on[0][0]), on[0][1]))
		var lost uint64
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
			c, d := g.MemberFrames(0, 0)
			if c == uint64(i+1) {
				lost = d
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("member 0 counted %d of the %d frames sent within 5 s", c, i+1)
			}
		}
		if lost == uint64(i-got) { // not this one
			if _, ok := gs[1].recv(t, 5*time.Second); !ok {
				t.Fatalf("frame %d was not discarded and did not arrive", i)
			}
			got++
		}
	}
	if got < n/4 || got > 3*n/4 {
		t.Errorf("50%% loss delivered %d of %d", got, n)
	}
	if c, d := g.MemberFrames(0, 0); c != n || int(d) != n-got {
		t.Errorf("member 0: %d crossed, %d discarded; %d delivered of %d", c, d, got, n)
	}
	const delay = 150 * time.Millisecond
	g.Impair(1, Impairment{Delay: delay})
	start := time.Now()
	gs[0].send(t, roceFrame(gs[1].mac, gs[0].mac, false, uint16(off[0][0]), off[0][1]))
	if _, ok := gs[1].recv(t, 5*time.Second); !ok {
		t.Fatal("a delayed frame never arrived")
	}
	if d := time.Since(start); d < delay {
		t.Errorf("a frame on a member delaying %s arrived after %s", delay, d)
	}
	if _, err := s.SetECMP(2, 5); err == nil {
		t.Error("SetECMP accepted a port the switch does not have")
	}
	if _, err := s.SetECMP(65, 1); err == nil {
		t.Error("SetECMP accepted 65 members")
	}
}
