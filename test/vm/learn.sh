# make learn-doc: the runs docs/learn.md quotes. Runs inside the guest (busybox sh) via
# `guestrun -script test/vm/learn.sh`, on Soft-RoCE (rxe0 on the dummy netdev d0):
#   1. gorping devices -v
#   2. a gorping server and a -C 2 client, both with --trace, with the kernel's function
#      tracer on rxe_mmap and ib_uverbs_comp_handler (their call stacks: who serves the
#      mmap of a ring, who wakes the completion channel)
#   3. how many processes can busy-poll one device at once: 1, 2, 4 and 8 gorping
#      clients with --poll at the same time against one persistent server, each
#      -C 300 --stats, with the device's resource counts while they run
#   4. the QP types on the device: `rdma resource show qp` before and during one RC
#      connection (the kernel's QP1 beside gorping's two RC QPs), the CM messages QP1
#      carried for it (the port's cm_tx_msgs/cm_rx_msgs) and the packets the device sent
#      (rdma statistic: the RC ACKs among them)
# Each part's output is printed whole, after a "== " line naming the command.
st=0
fail() { echo "learn: FAIL: $*"; st=1; }

# wait_listen: a gorping server's rdma_cm id listens (up to 30 s).
wait_listen() {
	i=0
	until $GORPING_RDMA_TOOL resource show cm_id | grep "state LISTEN" | grep -q "comm gorping"; do
		i=$((i+1))
		if [ $i -gt 300 ] || ! kill -0 "$1" 2>/dev/null; then
			echo "learn: gorping server is not listening"
			return 1
		fi
		sleep 0.1
	done
}

echo "== uname -r: $(uname -r); CPUs: $(grep -c ^processor /proc/cpuinfo)"
echo "== gorping devices -v"
$GORPING_BIN devices -v || fail "devices -v exit $?"

echo "== 2. one traced ping pair"
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T 2>/dev/null
traced=0
if [ -w $T/set_ftrace_filter ] && echo 'rxe_mmap ib_uverbs_comp_handler' > $T/set_ftrace_filter 2>/dev/null; then
	echo function > $T/current_tracer && echo 1 > $T/options/func_stack_trace && : > $T/trace && echo 1 > $T/tracing_on && traced=1
else
	echo "learn: no function tracer for rxe_mmap/ib_uverbs_comp_handler here (tracefs: $(ls $T 2>&1 | head -3))"
fi
$GORPING_BIN -s -a "$GORPING_IPV4" --trace >/tmp/server.out 2>/tmp/server.err &
server=$!
wait_listen $server || { fail "no server"; cat /tmp/server.err; }
echo "== command: gorping -c -a $GORPING_IPV4 -C 2 -V --trace"
$GORPING_BIN -c -a "$GORPING_IPV4" -C 2 -V --trace >/tmp/client.out 2>/tmp/client.err
client=$?
i=0
while kill -0 $server 2>/dev/null && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done
kill $server 2>/dev/null
wait $server
srv=$?
[ $traced = 1 ] && echo 0 > $T/tracing_on
echo "== client stderr"
cat /tmp/client.err
echo "== server (gorping -s -a $GORPING_IPV4 --trace) stderr"
cat /tmp/server.err
echo "== client exit $client, server exit $srv"
[ $client -eq 0 ] && [ $srv -eq 0 ] || fail "traced pair: client $client server $srv"
if [ $traced = 1 ]; then
	echo "== kernel function trace (rxe_mmap, ib_uverbs_comp_handler with their stacks)"
	grep -v '^#' $T/trace | head -120
	echo nop > $T/current_tracer
	echo 0 > $T/options/func_stack_trace
	: > $T/set_ftrace_filter
fi

echo "== 3. busy-polling processes at once"
$GORPING_BIN -s -P -a "$GORPING_IPV4" >/tmp/pserver.out 2>&1 &
pserver=$!
wait_listen $pserver || fail "no persistent server"
for n in 1 2 4 8; do
	start=$(cut -d" " -f1 /proc/uptime)
	k=1
	while [ $k -le $n ]; do
		$GORPING_BIN -c -a "$GORPING_IPV4" -C 300 --poll --stats >/tmp/poll.$n.$k 2>&1 &
		eval "pid$k=$!"
		k=$((k+1))
	done
	# While they run: the device's contexts and QPs (rdma resource), the CPUs' load.
	sleep 1
	echo "== $n at once: rdma resource show (while running): $($GORPING_RDMA_TOOL resource show | tr '\n' ' ')"
	echo "== $n at once: loadavg $(cat /proc/loadavg)"
	k=1
	while [ $k -le $n ]; do
		eval "wait \$pid$k" || fail "$n pollers: client $k exit $?"
		k=$((k+1))
	done
	end=$(cut -d" " -f1 /proc/uptime)
	echo "== $n at once: wall $(echo "$start $end" | awk '{printf "%.2f", $2-$1}') s"
	k=1
	while [ $k -le $n ]; do
		echo "client $k: $(grep -E '^(300 pings|rtt )' /tmp/poll.$n.$k | tr '\n' ' ')"
		k=$((k+1))
	done
done
kill $pserver 2>/dev/null
wait $pserver 2>/dev/null

echo "== 4. QP types: the kernel's QP1 and one RC connection"
P=/sys/class/infiniband/rxe0/ports/1
# cm_counts: the CM messages QP1 sent and received so far, by type (non-zero only).
cm_counts() {
	for dir in cm_tx_msgs cm_rx_msgs; do
		printf '%s:' "$dir"
		for f in $P/$dir/*; do
			v=$(cat "$f" 2>/dev/null) && [ "$v" != 0 ] && printf ' %s=%s' "${f##*/}" "$v"
		done
		echo
	done
}
# pkts: the device's sent and received packet counters.
pkts() { $GORPING_RDMA_TOOL statistic show link rxe0/1 2>&1 | awk '{for (i = 1; i < NF; i++) if ($i == "sent_pkts" || $i == "rcvd_pkts") printf "%s %s ", $i, $(i+1)} END {print ""}'; }
echo "== command: rdma resource show qp (no connection)"
$GORPING_RDMA_TOOL resource show qp
echo "== command: rdma -d resource show qp (no connection)"
$GORPING_RDMA_TOOL -d resource show qp
echo "== CM messages before: $(cm_counts | tr '\n' ' ')"
echo "== packets before: $(pkts)"
$GORPING_BIN -s -a "$GORPING_IPV4" >/tmp/qserver.out 2>&1 &
qserver=$!
wait_listen $qserver || fail "no server for the QP types"
echo "== command: gorping -c -a $GORPING_IPV4 -C 10 -i 0.5 -v (5 s connected)"
$GORPING_BIN -c -a "$GORPING_IPV4" -C 10 -i 0.5 -v >/tmp/qclient.out 2>&1 &
qclient=$!
i=0
until [ "$($GORPING_RDMA_TOOL resource show qp | grep -c 'type RC.*state RTS')" -ge 2 ]; do
	i=$((i+1))
	if [ $i -gt 300 ] || ! kill -0 $qclient 2>/dev/null; then
		fail "no two RC QPs in RTS within 30 s"
		break
	fi
	sleep 0.1
done
echo "== command: rdma resource show qp (connected)"
$GORPING_RDMA_TOOL resource show qp
echo "== command: rdma -d resource show qp (connected)"
$GORPING_RDMA_TOOL -d resource show qp
echo "== command: rdma resource show cm_id (connected)"
$GORPING_RDMA_TOOL resource show cm_id
wait $qclient || fail "QP types: client exit $?"
i=0
while kill -0 $qserver 2>/dev/null && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done
kill $qserver 2>/dev/null
wait $qserver || fail "QP types: server exit $?"
echo "== client: $(tail -1 /tmp/qclient.out) ($(grep -c 'ping data' /tmp/qclient.out) ping data lines: $(wc -l </tmp/qclient.out) lines)"
echo "== CM messages after: $(cm_counts | tr '\n' ' ')"
echo "== packets after: $(pkts)"
echo "== command: rdma resource show qp (after)"
$GORPING_RDMA_TOOL resource show qp
[ $st -eq 0 ] && echo "learn: PASS"
exit $st
