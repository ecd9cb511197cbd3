package rping

import "strconv"

// Payload bounds, as rping defines them. MinSize is 23, not the 26 rping's author
// intended: rping stringifies the literal text INT_MAX ("INT_MAX" + NUL = 8 bytes)
// plus sizeof("rdma-ping-%d: ") = 15, and every Debian build reports 23.
const (
	MinSize     = 23
	MaxSize     = 65535
	DefaultSize = 64
	DefaultPort = 7174
)

// fillPayload writes ping number ping's payload into buf the way rping's client does:
// "rdma-ping-<n>: " followed by a run of the 58 ASCII codes 'A'..'z' starting at
// 'A'+(n mod 58), with the last byte set to NUL. len(buf) must be at least MinSize.
// It allocates nothing, so the ping loop can call it every iteration.
func fillPayload(buf []byte, ping int) {
	var num [20]byte
	prefix := strconv.AppendInt(num[:0], int64(ping), 10)
	n := copy(buf, "rdma-ping-")
	n += copy(buf[n:], prefix)
	n += copy(buf[n:], ": ")
	c := byte('A' + ping%58)
	for i := n; i < len(buf); i++ {
		buf[i] = c
		if c++; c > 'z' {
			c = 'A'
		}
	}
	buf[len(buf)-1] = 0
}

// PayloadString is the text rping prints for ping number ping at size size: the
// payload up to (not including) its NUL, i.e. what follows "ping data: ".
func PayloadString(ping, size int) string {
	buf := make([]byte, size)
	fillPayload(buf, ping)
	return string(buf[:size-1])
}
