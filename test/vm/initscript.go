package vm

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/gorping/gorping/test/vm/agent"
)

// Guest network and test environment, as the tests see it (GORPING_* variables).
const (
	GuestIPv4 = "192.0.2.1"   // TEST-NET-1, on dummy interface d0
	GuestIPv6 = "2001:db8::1" // documentation prefix, "nodad" so it is usable at once
	GuestDev  = "rxe0"
	// The GIDs rxe0 must show before anything runs: RoCE v2's IPv4-mapped GID
	// of GuestIPv4 and the GID of GuestIPv6, as sysfs prints them.
	gidIPv4 = "0000:0000:0000:0000:0000:ffff:c000:0201"
	gidIPv6 = "2001:0db8:0000:0000:0000:0000:0000:0001"

	// Soft-iWARP gets its own dummy interface: with rxe and siw on one
	// interface rdma_cm picks siw for its addresses. siw runs over kernel TCP,
	// so a second local address is reachable (rxe's UDP is not). Name and
	// addresses are ones no other guest test uses (the error tests create d1,
	// d9 and use TEST-NET-2/3); 198.19.0.0/24 is in the benchmarking range.
	GuestSiwNetdev = "iw0"
	GuestSiwIPv4   = "198.19.0.1"
	GuestSiwIPv6   = "2001:db8:5177::1"
	GuestSiwDev    = "siw0"
	// GuestAfterScript is Options.After in the guest.
	GuestAfterScript = "/guest/after.sh"
)

// GuestTest is a test binary in the image.
type GuestTest struct {
	Name string // shown in markers and the verdict, e.g. "test_guest"
	Path string // guest path
	// Skip is this binary's -test.skip when set (InitSpec.TestSkip's alternatives and
	// the package's host tests: hostTestsSkip), else InitSpec.TestSkip applies.
	Skip string
}

// InitSpec is what the generated /init does.
type InitSpec struct {
	Nonce        string
	Modules      []LoadStep
	SetupTimeout time.Duration // the guest's own wait for rxe0; the host enforces it too
	Tests        []GuestTest   // run in order with -test.v, unless Cmd is set
	TestRun      string        // -test.run
	TestSkip     string        // -test.skip
	TestCount    int           // -test.count, when over 1
	TestTimeout  time.Duration // -test.timeout
	Cmd          string        // a shell command instead of the tests
	After        string        // the guest path of a script run after the tests (not with Cmd)
	// Siw brings up GuestSiwDev on GuestSiwNetdev (siw.ko is among Modules); otherwise
	// SiwWhy says why this guest has none, and the tests see it.
	Siw    bool
	SiwWhy string
	// Cluster makes the guest a host of the multi-host test bed (cluster.go):
	// rxe0 on the data NIC, the agent instead of Tests or Cmd.
	Cluster bool
	// Rails (cluster only) is the number of RDMA rails: rail r >= 1 is eth<r>
	// with rxe<r> (ClusterRailIPv4); NodeNet adds node0, the network without
	// RDMA (ClusterNodeIPv4).
	Rails   int
	NodeNet bool
}

// The multi-host test bed's addressing. Host N (1-based) has data NIC MAC
// ClusterDataMAC+NN with ClusterNet4.N and ClusterNet6+hex(N) on eth0, and a
// management NIC (MAC ClusterMgmtMAC+NN) with ClusterMgmtIP, QEMU's user
// network, where the agent listens.
const (
	ClusterDataMAC = "52:54:00:03:00:"
	ClusterMgmtMAC = "52:54:00:02:00:"
	ClusterNet4    = "10.0.3"       // 10.0.3.N/24, the mission's own addresses
	ClusterNet6    = "2001:db8:3::" // documentation prefix, /64
	ClusterMgmtIP  = "10.0.2.15"    // QEMU user networking's guest address
	GuestAgent     = "/usr/local/bin/guestagent"
)

// ClusterIPv4 and ClusterIPv6 are host n's data addresses.
func ClusterIPv4(n int) string { return fmt.Sprintf("%s.%d", ClusterNet4, n) }
func ClusterIPv6(n int) string { return fmt.Sprintf("%s%x", ClusterNet6, n) }

// A cluster of several rails (ClusterOptions.Rails): rail r (0-based; rail 0
// is the data NIC above) of host n is NIC eth<r> with MAC 52:54:00:0<3+r>:00:NN,
// 10.0.<3+r>.n/24 and 2001:db8:<3+r>::n/64, rxe<r> on it, each rail its own
// switch; the node network (ClusterOptions.NodeNet) is node0, 10.0.9.n/24, on
// a switch of its own and without RDMA.
const (
	MaxClusterRails = 6
	ClusterNodeMAC  = "52:54:00:09:00:"
	ClusterNodeNet4 = "10.0.9"
)

// Rail is one RDMA rail of a cluster host.
type Rail struct {
	N          int    // 0-based
	Netdev     string // eth<N>
	Device     string // rxe<N>
	IPv4, IPv6 string
	MAC        string
}

// ClusterRailIPv4, ClusterRailIPv6 and ClusterRailMAC are rail r's of host n.
func ClusterRailIPv4(r, n int) string { return fmt.Sprintf("10.0.%d.%d", 3+r, n) }
func ClusterRailIPv6(r, n int) string { return fmt.Sprintf("2001:db8:%x::%x", 3+r, n) }
func ClusterRailMAC(r, n int) string  { return fmt.Sprintf("52:54:00:%02x:00:%02x", 3+r, n) }

// ClusterNodeIPv4 is host n's node address (node0).
func ClusterNodeIPv4(n int) string { return fmt.Sprintf("%s.%d", ClusterNodeNet4, n) }

// railTmpl is what /init needs of one extra rail.
type railTmpl struct {
	N                                 int
	MACPrefix, Net4, Net6, GID4, GID6 string
}

func extraRails(n int) []railTmpl {
	var out []railTmpl
	for r := 1; r < n; r++ {
		out = append(out, railTmpl{N: r, MACPrefix: fmt.Sprintf("52:54:00:%02x:00:", 3+r),
			Net4: fmt.Sprintf("10.0.%d", 3+r), Net6: fmt.Sprintf("2001:db8:%x::", 3+r),
			GID4: fmt.Sprintf("0000:0000:0000:0000:0000:ffff:0a00:%02x", 3+r),
			GID6: fmt.Sprintf("2001:0db8:%04x:0000:0000:0000:0000:", 3+r)})
	}
	return out
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var initTmpl = template.Must(template.New("init").Funcs(template.FuncMap{
	"q":       ShellQuote,
	"modpath": ModulePath,
	"secs":    func(d time.Duration) int { return int(d.Seconds()) },
}).Parse(`#!/usr/bin/busybox sh
# /init of the gorping guest, generated by test/vm (see initscript.go).
# Markers ({{.Marker}}...) tell the host where the guest is; see console.go.
/usr/bin/busybox mkdir -p /bbin
/usr/bin/busybox --install -s /bbin
export PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bbin
mark() { echo "{{.Marker}}$*"; }
oneline() { tr '\n' ' ' | sed 's/ *$//'; }
# Busybox's own "ip" applet wins over iproute2's inside this shell: call
# iproute2 by full path.
IP={{q .IP}}
RDMA={{q .RDMA}}
mark init
setup_fail() { mark setup-fail "$*"; poweroff -f; sleep 60; }
mount -t proc proc /proc || setup_fail "mount /proc"
mount -t sysfs sys /sys || setup_fail "mount /sys"
mount -t devtmpfs dev /dev || setup_fail "mount /dev"
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmp /tmp || setup_fail "mount /tmp"
mount -t tmpfs tmp /dev/shm
mount -t tmpfs tmp /run
echo "guest kernel: $(uname -r)"
mark kernel "$(uname -r)"

# Modules in dependency order (no depmod here).
load() {
	if out=$(insmod "$2" 2>&1); then return 0; fi
	case "$out" in *"File exists"*) return 0;; esac
	if [ "$3" = required ]; then
		mark module-fail "$1" "$(echo "$out" | oneline)"
		poweroff -f; sleep 60
	fi
	mark module-warn "$1" "$(echo "$out" | oneline)"
}
{{range $i, $m := .Modules}}load {{$m.Name}} {{modpath $i $m.Name}} {{if $m.Required}}required{{else}}optional{{end}}
{{end}}
run_or_fail() { out=$("$@" 2>&1) || setup_fail "$*: $(echo "$out" | oneline)"; }
run_or_fail $IP link set lo up
{{if .Cluster}}# A host of the multi-host test bed: the data NIC (MAC {{.DataMAC}}NN) becomes
# eth0 with rxe0 on it; the management NIC ({{.MgmtMAC}}NN, QEMU user
# networking) carries only the agent, which the host reaches through a
# 127.0.0.1 forward. The host number comes from the kernel command line.
host=$(sed -n 's/.*gorping.host=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$host" ] || setup_fail "no gorping.host= on the kernel command line"
data=; mgmt=
for d in /sys/class/net/*; do
	case "$(cat $d/address)" in
	{{.DataMAC}}*) data=${d##*/};;
	{{.MgmtMAC}}*) mgmt=${d##*/};;
	esac
done
[ -n "$data" ] && [ -n "$mgmt" ] || setup_fail "NICs not found: data '$data', management '$mgmt' among $(ls /sys/class/net | oneline)"
run_or_fail $IP link set $mgmt name mgmt0
run_or_fail $IP link set $data name eth0
# No IPv6 on the management NIC: QEMU's user network advertises a default
# route, which would capture the data network's IPv6 traffic whenever eth0
# has no route (after a link flap, for instance).
echo 1 > /proc/sys/net/ipv6/conf/mgmt0/disable_ipv6
run_or_fail $IP link set mgmt0 up
run_or_fail $IP addr add {{.MgmtIP}}/24 dev mgmt0
netdev=eth0
ipv4={{.Net4}}.$host
ipv6={{.Net6}}$(printf %x $host)
gid4={{.GID4Prefix}}$(printf %02x $host)
gid6={{.GID6Prefix}}$(printf %04x $host)
hostname h$host
{{else}}# Soft-RoCE on a dummy interface; client and server both use its address.
run_or_fail $IP link add d0 type dummy
netdev=d0
ipv4={{.IPv4}}
ipv6={{.IPv6}}
gid4={{.GIDv4}}
gid6={{.GIDv6}}
{{end}}run_or_fail $IP link set $netdev up
run_or_fail $IP addr add $ipv4/24 dev $netdev
run_or_fail $IP addr add $ipv6/64 dev $netdev nodad
if ! out=$($RDMA link add {{.Dev}} type rxe netdev $netdev 2>&1); then
	mark rxe-fail "rdma link add {{.Dev}} type rxe netdev $netdev: $(echo "$out" | oneline)"
	poweroff -f; sleep 60
fi
# wait_rxe DEV GID4 GID6 waits (10 polls a second) until DEV's port is ACTIVE
# and both GIDs exist.
wait_rxe() {
	port=/sys/class/infiniband/$1/ports/1
	i=0
	while :; do
		state=$(cat $port/state 2>/dev/null)
		gids=$(cat $port/gids/* 2>/dev/null)
		case "$state" in *ACTIVE*)
			case "$gids" in *$2*)
				case "$gids" in *$3*) return;; esac;;
			esac;;
		esac
		i=$((i+1))
		if [ $i -ge {{.SetupPolls}} ]; then
			mark rxe-fail "$1 after {{secs .SetupTimeout}}s: port state '$state', GIDs: $(echo "$gids" | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' | oneline)"
			poweroff -f; sleep 60
		fi
		sleep 0.1
	done
}
wait_rxe {{.Dev}} $gid4 $gid6
$RDMA link show {{.Dev}}/1
{{if .Cluster}}{{if or .ExtraRails .NodeNet}}
# The other rails (each NIC on its own switch and subnet, rxe<r> on it) and the
# node network (no RDMA). Their NICs are named first by role, then eth<r>, so
# that no new name is one the kernel gave another NIC.
nic_by_mac() {
	for d in /sys/class/net/*; do
		[ "$(cat $d/address)" = "$1" ] && { echo ${d##*/}; return; }
	done
}
{{range .ExtraRails}}nic=$(nic_by_mac {{.MACPrefix}}$(printf %02x $host))
[ -n "$nic" ] || setup_fail "rail {{.N}}'s NIC ({{.MACPrefix}}NN) not found among $(ls /sys/class/net | oneline)"
run_or_fail $IP link set $nic name rail{{.N}}
{{end}}{{if .NodeNet}}nic=$(nic_by_mac {{.NodeMAC}}$(printf %02x $host))
[ -n "$nic" ] || setup_fail "the node network's NIC ({{.NodeMAC}}NN) not found among $(ls /sys/class/net | oneline)"
run_or_fail $IP link set $nic name node0
run_or_fail $IP link set node0 up
run_or_fail $IP addr add {{.NodeNet4}}.$host/24 dev node0
{{end}}{{range .ExtraRails}}run_or_fail $IP link set rail{{.N}} name eth{{.N}}
run_or_fail $IP link set eth{{.N}} up
run_or_fail $IP addr add {{.Net4}}.$host/24 dev eth{{.N}}
run_or_fail $IP addr add {{.Net6}}$(printf %x $host)/64 dev eth{{.N}} nodad
if ! out=$($RDMA link add rxe{{.N}} type rxe netdev eth{{.N}} 2>&1); then
	mark rxe-fail "rdma link add rxe{{.N}} type rxe netdev eth{{.N}}: $(echo "$out" | oneline)"
	poweroff -f; sleep 60
fi
wait_rxe rxe{{.N}} {{.GID4}}$(printf %02x $host) {{.GID6}}$(printf %04x $host)
$RDMA link show rxe{{.N}}/1
{{end}}{{end}}{{end}}{{if .Siw}}
# Soft-iWARP on its own dummy interface.
run_or_fail $IP link add {{.SiwNetdev}} type dummy
run_or_fail $IP link set {{.SiwNetdev}} up
run_or_fail $IP addr add {{.SiwIPv4}}/24 dev {{.SiwNetdev}}
run_or_fail $IP addr add {{.SiwIPv6}}/64 dev {{.SiwNetdev}} nodad
if ! out=$($RDMA link add {{.SiwDev}} type siw netdev {{.SiwNetdev}} 2>&1); then
	setup_fail "rdma link add {{.SiwDev}} type siw netdev {{.SiwNetdev}}: $(echo "$out" | oneline)"
fi
port=/sys/class/infiniband/{{.SiwDev}}/ports/1
i=0
until grep -q ACTIVE $port/state 2>/dev/null; do
	i=$((i+1))
	if [ $i -ge {{.SetupPolls}} ]; then
		setup_fail "after {{secs .SetupTimeout}}s: {{.SiwDev}} port state '$(cat $port/state 2>/dev/null)'"
	fi
	sleep 0.1
done
$RDMA link show {{.SiwDev}}/1
{{if not .Cmd}}# Tests get siw0 only while a siw test runs (it adds and deletes the link):
# rdma_cm resolves loopback addresses through the first device with an active
# port, and once a removal test re-adds rxe0 that would be siw0 (iWARP, EINVAL).
run_or_fail $RDMA link delete {{.SiwDev}}
{{end}}export GORPING_SIW_DEV={{.SiwDev}} GORPING_SIW_NETDEV={{.SiwNetdev}} GORPING_SIW_IPV4={{.SiwIPv4}} GORPING_SIW_IPV6={{.SiwIPv6}}
{{else if not .Cluster}}
echo "siw: NOT AVAILABLE in this guest:" {{q .SiwWhy}}
export GORPING_SIW_UNAVAILABLE={{q .SiwWhy}}
{{end}}
export GORPING_BIN={{.Gorping}} GORPING_IPV4=$ipv4 GORPING_IPV6=$ipv6 GORPING_RDMA_TOOL=$RDMA
export HOME=/root TMPDIR=/tmp
ulimit -l unlimited 2>/dev/null
{{if .Cluster}}export GORPING_HOST=h$host GORPING_NETDEV=eth0
cd /root
mark ready
# The host drives this guest through the agent from here on; the guest ends
# when the host powers it off or kills QEMU.
while :; do
	{{.Agent}} -listen {{.MgmtIP}}:{{.AgentPort}}
	mark setup-fail "guest agent exited with status $?"
	sleep 1
done
{{else}}cd "$(mktemp -d /tmp/run.XXXXXX)"
mark ready
{{if .Cmd}}sh /guest/cmd.sh
st=$?
{{else}}st=0
{{range .Tests}}mark test-start {{.Name}}
{{.Path}} -test.v -test.timeout={{$.TestTimeout}}{{if $.TestRun}} -test.run={{q $.TestRun}}{{end}}{{with or .Skip $.TestSkip}} -test.skip={{q .}}{{end}}{{if gt $.TestCount 1}} -test.count={{$.TestCount}}{{end}}
s=$?
mark test-end {{.Name}} $s
[ $st -eq 0 ] && st=$s
{{end}}{{if .After}}mark test-start after-script
cd "$(mktemp -d /tmp/after.XXXXXX)"
sh {{.After}}
s=$?
mark test-end after-script $s
[ $st -eq 0 ] && st=$s
{{end}}{{end}}mark exit $st
poweroff -f
sleep 60
{{end}}`))

// InitScript renders the guest's /init.
func InitScript(s InitSpec) ([]byte, error) {
	polls := int(s.SetupTimeout / (100 * time.Millisecond))
	if polls < 1 {
		polls = 1
	}
	data := struct {
		InitSpec
		Marker, IP, RDMA, Gorping, IPv4, IPv6, Dev, GIDv4, GIDv6            string
		SiwNetdev, SiwIPv4, SiwIPv6, SiwDev                                 string
		SetupPolls                                                          int
		DataMAC, MgmtMAC, MgmtIP, Net4, Net6, GID4Prefix, GID6Prefix, Agent string
		AgentPort                                                           int
		ExtraRails                                                          []railTmpl
		NodeMAC, NodeNet4                                                   string
	}{s, MarkerPrefix(s.Nonce), GuestIP, GuestRDMA, GuestGorping, GuestIPv4, GuestIPv6, GuestDev, gidIPv4, gidIPv6,
		GuestSiwNetdev, GuestSiwIPv4, GuestSiwIPv6, GuestSiwDev, polls,
		ClusterDataMAC, ClusterMgmtMAC, ClusterMgmtIP, ClusterNet4, ClusterNet6,
		"0000:0000:0000:0000:0000:ffff:0a00:03", "2001:0db8:0003:0000:0000:0000:0000:", GuestAgent, agent.Port,
		extraRails(s.Rails), ClusterNodeMAC, ClusterNodeNet4}
	var b bytes.Buffer
	if err := initTmpl.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("render /init: %w", err)
	}
	return b.Bytes(), nil
}
