package mmio

// Recording: a test build (go test -tags mmiorecord) reports every barrier, MMIO store and
// doorbell-record store to subscribers, in program order per goroutine, after the
// operation itself ran. The mlx5 oracle compares that sequence with libmlx5's, and the
// ConnectX model learns of doorbells from it as a device would (only a store to the UAR
// page rings). Product builds have no recorder: Recording is false and the hooks compile
// away.

// Recording reports whether this build reports MMIO events to subscribers.
const Recording = recording

// Op is one kind of device-visible operation.
type Op uint8

// The operations, named after the functions that perform them.
const (
	OpToDevice   Op = iota + 1 // ToDevice
	OpFromDevice               // FromDevice
	OpWCStart                  // WCStart
	OpFlush                    // Flush
	OpStore64                  // Store64: 8 bytes to device memory
	OpCopy64                   // Copy64: 64 bytes to device memory
	OpRecord                   // StoreRecord: 4 bytes to a doorbell record
	OpStore32                  // Store32: 4 bytes to device memory
)

var opNames = [...]string{OpToDevice: "to_device", OpFromDevice: "from_device", OpWCStart: "wc_start",
	OpFlush: "flush", OpStore64: "store64", OpCopy64: "copy64", OpRecord: "record", OpStore32: "store32"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "op?"
}

// Event is one recorded operation. For stores Addr is the destination, Len the width in
// bytes and Data[:Len] the bytes stored, as they lie in memory.
type Event struct {
	Op   Op
	Addr uintptr
	Len  int
	Data [64]byte
}
