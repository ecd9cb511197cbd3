// Package probe is the mesh agent's probing: the connection a path probes over (Conn,
// opened by a Dial; the one seam a simulated fabric fills), the failure reason of an
// error, and the slot schedule and reconnection backoff of a path's loop.
//
// It knows nothing of where targets come from or of how outcomes are exported: data
// comes in as targets and leaves through the recorder its caller gives.
package probe
