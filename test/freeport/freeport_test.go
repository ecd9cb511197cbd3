package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortIsBindableDistinctAndNotEphemeral(t *testing.T) {
	low := ephemeralLow()
	seen := map[string]bool{}
	for _, network := range []string{"udp4", "tcp4", "udp4", "tcp4"} {
		for range 50 {
			p, err := Port(network)
			if err != nil {
				t.Fatal(err)
			}
			if p < portsFloor || p >= low {
				t.Fatalf("%s port %d outside [%d, %d): the kernel may hand an ephemeral port to another socket first", network, p, portsFloor, low)
			}
			key := network + "/" + strconv.Itoa(p)
			if seen[key] {
				t.Fatalf("%s port %d handed out twice", network, p)
			}
			seen[key] = true
		}
	}
}

func TestPortSkipsABoundPort(t *testing.T) {
	// A bound port is not bindable, so Port never returns one in use.
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held := c.LocalAddr().(*net.UDPAddr).Port
	if err := bindable("udp4", held); err == nil {
		t.Fatalf("port %d is bound, bindable said it is free", held)
	}
	if err := bindable("sctp", 1); err == nil {
		t.Fatal("an unknown network was accepted")
	}
}
