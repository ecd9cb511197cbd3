package guesttest

import "testing"

func TestTCPListening(t *testing.T) {
	// Rows as the 6.1 guest printed them: siw's listener on 198.19.0.1:9004
	// (0x232C), and an established connection on the same port.
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 010013C6:232C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12171 1 0000000000000000 100 0 0 10 0
   2: 010013C6:232D 010013C6:C90D 01 00000000:00000028 00:00000000 00000000     0        0 12184 1 0000000000000000 20 4 28 10 -1
`
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: B80D0120000000000000000001000000:1CB6 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
`
	for _, c := range []struct {
		text string
		port int
		want bool
	}{
		{tcp, 9004, true},
		{tcp, 9005, false}, // established, not listening
		{tcp, 7350, false},
		{tcp6, 7350, true},
		{"", 9004, false},
	} {
		if got := TCPListening(c.text, c.port); got != c.want {
			t.Errorf("TCPListening(port %d) = %v, want %v", c.port, got, c.want)
		}
	}
}
