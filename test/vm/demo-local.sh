# make demo-local: a gorping server and a gorping client over Soft-RoCE in the guest.
# Runs inside the guest (busybox sh) via `guestrun -script test/vm/demo-local.sh`.
echo "== gorping devices -v: the RDMA device the guest has (Soft-RoCE over dummy d0)"
$GORPING_BIN devices -v || exit 1
echo "== gorping server on $GORPING_IPV4 (rxe0 = Soft-RoCE on dummy d0), client -C 5 -v -V"
echo "   Each ping: the client SENDs an advert of its buffer, the server RDMA READs it"
echo "   (server ping data), SENDs a go-ahead, gets a second advert and RDMA WRITEs the"
echo "   data back into the client's buffer (ping data), which the client validates (-V)."
$GORPING_BIN -s -a "$GORPING_IPV4" -v &
server=$!
# wait_listen: wait (up to 30 s) until the server's rdma_cm id listens: no sleep-and-hope.
# (Match on the command name: rdma lists the id under whichever thread created it.)
wait_listen() {
	i=0
	until $GORPING_RDMA_TOOL resource show cm_id | grep "state LISTEN" | grep -q "comm gorping"; do
		i=$((i+1))
		if [ $i -gt 300 ] || ! kill -0 $server 2>/dev/null; then
			echo "demo: gorping server is not listening"
			kill $server 2>/dev/null
			exit 1
		fi
		sleep 0.1
	done
}
# wait_server: the server serves one client, then exits; don't wait forever if it does not.
wait_server() {
	i=0
	while kill -0 $server 2>/dev/null && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done
	kill $server 2>/dev/null
	wait $server
}
wait_listen
$GORPING_BIN -c -a "$GORPING_IPV4" -C 5 -v -V
client=$?
wait_server
srv=$?
echo "== client exit $client, server exit $srv"
echo "== the same with gorping's own --stats: each ping's round-trip time and ping(8)'s summary"
$GORPING_BIN -s -a "$GORPING_IPV4" &
server=$!
wait_listen
$GORPING_BIN -c -a "$GORPING_IPV4" -C 20 -V --stats
stats=$?
wait_server
srv2=$?
echo "== client exit $stats, server exit $srv2"
echo "== RDMA resources now (the kernel's own only: gorping released everything):"
$GORPING_RDMA_TOOL resource show
[ $client -eq 0 ] && [ $srv -eq 0 ] && [ $stats -eq 0 ] && [ $srv2 -eq 0 ]
