// Command guestagent is the remote control of a multi-host test-bed guest (see
// package agent). A cluster guest's /init starts it on the management NIC once
// rxe is up; the host reaches it only through QEMU's 127.0.0.1 port forward.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"syscall"

	"github.com/gorping/gorping/test/vm/agent"
)

func main() {
	addr := flag.String("listen", fmt.Sprintf(":%d", agent.Port), "address to serve on")
	flag.Parse()
	s := &agent.Server{PowerOff: func() {
		// The plug pulled: no sync, no unmount (the guest has nothing to save).
		syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	}}
	if err := http.ListenAndServe(*addr, s.Handler()); err != nil {
		fmt.Fprintf(os.Stderr, "guestagent: %v\n", err)
		os.Exit(1)
	}
}
