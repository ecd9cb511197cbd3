# make demo: gorping between two hosts, as a user runs it. guestrun boots two
# QEMU guests on one virtual Ethernet (h1 10.0.3.1, h2 10.0.3.2, Soft-RoCE rxe0
# on each eth0, stock rping and gorping installed) and runs this script on the
# host; gx runs each command on a guest. Every wait has a deadline.
set -u -o pipefail
S=$H2_IPV4
. "$(dirname "$0")/demo-lib.sh" # step, once
fail() { echo "demo: $*"; exit 1; }
# merged: run a command in the guest with its stderr in its stdout, so that gorping's
# lines come in the order it wrote them (gx passes the two streams on separately).
merged=(sh -c 'exec "$@" 2>&1' sh)
serve() { # serve ARGS...: a gorping server on h2 in the background, listening
	gx -bg srv h2 gorping -s -a $S "$@" || fail "cannot start the server"
	gx -timeout 60s -listen $S:7174 h2 || fail "the server does not listen"
}
served() { gx -timeout 60s -wait srv; echo "(h2: server exit $?)"; }

step "h2: gorping devices: Soft-RoCE rxe0 on eth0 ($S)"
gx h2 gorping devices || fail "no RDMA device on h2"

step "h2: gorping -s -a $S -v        h1: gorping -c -a $S -v -C 5"
serve -v
gx h1 gorping -c -a $S -v -C 5 || fail "the client failed"
served

step "h1: ... --stats: each ping's round-trip time, and ping(8)'s summary"
serve
gx h1 "${merged[@]}" gorping -c -a $S -C 10 --stats | once || fail "the client failed"
served

step "h2 delays all it sends by 10 ms (tc netem): a ping crosses h2->h1 4 times, RTTs grow by 40 ms"
gx h2 tc qdisc add dev eth0 root netem delay 10ms || fail "netem"
serve
gx h1 "${merged[@]}" gorping -c -a $S -C 5 --stats | once || fail "the client failed"
served
gx h2 tc qdisc del dev eth0 root

step "a partition: h1 loses all it sends in the middle of an endless run; gorping gives up after --timeout 5 (default: the RC retry budget, 19.3 s here) and says why"
# The server waits longer (10 s): h2's packets still reach h1, so a server that
# gave up first would disconnect the client before it could explain anything.
serve --timeout 10
gx -bg cli h1 "${merged[@]}" gorping -c -a $S -i 0.2 --stats --timeout 5 || fail "cannot start the client"
gx -timeout 60s -until "seq=4" -wait cli | once || fail "no pings"
gx h1 tc qdisc add dev eth0 root netem loss 100% || fail "netem"
# gorping's explanation, then its statistics, as it wrote them.
gx -timeout 60s -wait cli | once
echo "(h1: client exit ${PIPESTATUS[0]}; 110 = ETIMEDOUT)"
served
gx h1 tc qdisc del dev eth0 root
