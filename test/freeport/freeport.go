// Package freeport hands tests ports on 127.0.0.1 for programs that bind them
// themselves (QEMU's netdevs and forwards, an agent's listener).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are taken below the kernel's ephemeral range. A port found free by
// binding port 0 is an ephemeral one, which the kernel may hand to the next
// socket that binds none (a guest's UDP through slirp, a Prometheus scrape)
// before the program binds it (QEMU exited with "Address already in use" in a
// clean-clone run, 2026-12-04).
const portsFloor = 20000

var (
	portsMu    sync.Mutex
	portsGiven = map[string]bool{} // "udp4/20417": handed out by this process
)

// ephemeralLow is the first port of net.ipv4.ip_local_port_range (32768 if unread).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}

// Port finds a port on 127.0.0.1 for network ("tcp4" or "udp4") that nobody
// binds now, that this process has not handed out, and that is not ephemeral.
func Port(network string) (int, error) {
	hi := ephemeralLow()
	if hi-portsFloor < 1000 {
		return 0, fmt.Errorf("find a free %s port: the ephemeral range starts at %d, leaving too few ports in [%d, %d) (net.ipv4.ip_local_port_range)", network, hi, portsFloor, hi)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	var last error
	for range 200 {
		p := portsFloor + rand.IntN(hi-portsFloor)
		key := network + "/" + strconv.Itoa(p)
		if portsGiven[key] {
			continue
		}
		if last = bindable(network, p); last != nil {
			continue
		}
		portsGiven[key] = true
		return p, nil
	}
	return 0, fmt.Errorf("find a free %s port in [%d, %d): 200 tries, the last: %w", network, portsFloor, hi, last)
}

func bindable(network string, port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	switch network {
	case "udp4":
		c, err := net.ListenPacket(network, addr)
		if err != nil {
			return err
		}
		return c.Close()
	case "tcp4":
		l, err := net.Listen(network, addr)
		if err != nil {
			return err
		}
		return l.Close()
	}
	return fmt.Errorf("network %q", network)
}
