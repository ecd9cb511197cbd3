package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorping/gorping/test/freeport"
)

// Switch is the multi-host test bed's Ethernet: a learning L2 switch on the
// host that QEMU's dgram netdevs talk to over UDP on 127.0.0.1, one socket per
// guest. Frames are forwarded, never interpreted above Ethernet, and the host
// kernel only ever sends UDP to 127.0.0.1. It counts RoCEv2 frames (UDP port
// 4791) per direction, so a test can show that its packets crossed the wire,
// and can write every frame to a pcap file for Wireshark.
type Switch struct {
	ports []*switchPort

	mu   sync.Mutex
	macs map[[6]byte]int // learned: source MAC -> port

	pcapMu sync.Mutex
	pcap   io.WriteCloser

	roce [][]atomic.Uint64 // [from][to] RoCEv2 frames forwarded
	ecmp atomic.Pointer[ECMP]
	done chan struct{}
	wg   sync.WaitGroup
}

type switchPort struct {
	conn  *net.UDPConn // the switch's end; QEMU's "remote"
	guest *net.UDPAddr // QEMU's "local": where this port's frames go
}

// NewSwitch opens n ports on 127.0.0.1 and starts forwarding. pcapPath, if
// set, receives every frame the switch forwards.
func NewSwitch(n int, pcapPath string) (*Switch, error) {
	s := &Switch{macs: map[[6]byte]int{}, done: make(chan struct{})}
	s.roce = make([][]atomic.Uint64, n)
	for i := range s.roce {
		s.roce[i] = make([]atomic.Uint64, n)
	}
	for range n {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("switch port: %w", err)
		}
		gport, err := freeport.Port("udp4")
		if err != nil {
			conn.Close()
			s.Close()
			return nil, err
		}
		s.ports = append(s.ports, &switchPort{conn: conn, guest: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: gport}})
	}
	if pcapPath != "" {
		f, err := os.Create(pcapPath)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("pcap: %w", err)
		}
		// pcap global header: magic, v2.4, UTC, accuracy 0, snaplen 65535, Ethernet.
		hdr := make([]byte, 24)
		binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
		binary.LittleEndian.PutUint16(hdr[4:], 2)
		binary.LittleEndian.PutUint16(hdr[6:], 4)
		binary.LittleEndian.PutUint32(hdr[16:], 65535)
		binary.LittleEndian.PutUint32(hdr[20:], 1)
		f.Write(hdr)
		s.pcap = f
	}
	for i := range s.ports {
		s.wg.Add(1)
		go s.forward(i)
	}
	return s, nil
}

// NetdevArgs is QEMU's -netdev value for port i's guest, netdev id.
func (s *Switch) NetdevArgs(i int, id string) string {
	p := s.ports[i]
	return fmt.Sprintf("dgram,id=%s,local.type=inet,local.host=127.0.0.1,local.port=%d,remote.type=inet,remote.host=127.0.0.1,remote.port=%d", id,
		p.guest.Port, p.conn.LocalAddr().(*net.UDPAddr).Port)
}

func (s *Switch) forward(from int) {
	defer s.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, _, err := s.ports[from].conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP port unreachable from a powered-off guest
		}
		if n < 14 {
			continue
		}
		frame := buf[:n]
		var dst, src [6]byte
		copy(dst[:], frame[0:6])
		copy(src[:], frame[6:12])
		s.mu.Lock()
		s.macs[src] = from
		to, known := s.macs[dst]
		s.mu.Unlock()
		s.capture(frame)
		if dst[0]&1 == 0 && known {
			if to != from {
				s.unicast(frame, from, to)
			}
			continue
		}
		for to, p := range s.ports { // broadcast, multicast, unknown unicast
			if to != from {
				s.ports[from].conn.WriteToUDP(frame, p.guest)
			}
		}
	}
}

// unicast forwards a frame to its learned port, across the ECMP group if one
// lies between the two.
func (s *Switch) unicast(frame []byte, from, to int) {
	if g := s.ecmp.Load(); g != nil {
		pass, delay := g.cross(frame, from, to)
		if !pass {
			return
		}
		if delay > 0 {
			held := append([]byte(nil), frame...)
			time.AfterFunc(delay, func() { s.send(held, from, to) })
			return
		}
	}
	s.send(frame, from, to)
}

func (s *Switch) send(frame []byte, from, to int) {
	if isRoCEv2(frame) {
		s.roce[from][to].Add(1)
	}
	s.ports[from].conn.WriteToUDP(frame, s.ports[to].guest)
}

// isRoCEv2 reports whether an Ethernet frame carries UDP to port 4791 (IPv4 or
// IPv6, no VLAN tag).
func isRoCEv2(f []byte) bool {
	et := binary.BigEndian.Uint16(f[12:14])
	switch {
	case et == 0x0800 && len(f) >= 14+20+4 && f[14+9] == 17:
		ihl := int(f[14]&0x0f) * 4
		return len(f) >= 14+ihl+4 && binary.BigEndian.Uint16(f[14+ihl+2:]) == 4791
	case et == 0x86dd && len(f) >= 14+40+4 && f[14+6] == 17:
		return binary.BigEndian.Uint16(f[14+40+2:]) == 4791
	}
	return false
}

func (s *Switch) capture(frame []byte) {
	if s.pcap == nil {
		return
	}
	now := time.Now()
	rec := make([]byte, 16, 16+len(frame))
	binary.LittleEndian.PutUint32(rec[0:], uint32(now.Unix()))
	binary.LittleEndian.PutUint32(rec[4:], uint32(now.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(rec[8:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(rec[12:], uint32(len(frame)))
	s.pcapMu.Lock()
	s.pcap.Write(append(rec, frame...))
	s.pcapMu.Unlock()
}

// RoCEFrames is how many RoCEv2 frames the switch has forwarded from port
// from to port to (0-based).
func (s *Switch) RoCEFrames(from, to int) uint64 { return s.roce[from][to].Load() }

// Close stops forwarding and closes the ports and the capture.
func (s *Switch) Close() {
	for _, p := range s.ports {
		p.conn.Close()
	}
	s.wg.Wait()
	s.pcapMu.Lock()
	if s.pcap != nil {
		s.pcap.Close()
		s.pcap = nil
	}
	s.pcapMu.Unlock()
}
