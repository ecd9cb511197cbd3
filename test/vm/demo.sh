# make demo: a gorping server and a gorping client over Soft-RoCE in the guest.
# Runs inside the guest (busybox sh) via `guestrun -script test/vm/demo.sh`.
echo "== gorping server on $GORPING_IPV4, client -C 5 -v -V"
$GORPING_BIN -s -a "$GORPING_IPV4" -v &
server=$!
# Wait (up to 30 s) until the server's rdma_cm id listens: no sleep-and-hope.
i=0
until $GORPING_RDMA_TOOL resource show cm_id | grep -q "state LISTEN.*pid $server "; do
	i=$((i+1))
	if [ $i -gt 300 ] || ! kill -0 $server 2>/dev/null; then
		echo "demo: gorping server is not listening"
		kill $server 2>/dev/null
		exit 1
	fi
	sleep 0.1
done
$GORPING_BIN -c -a "$GORPING_IPV4" -C 5 -v -V
client=$?
# The server serves one client, then exits; don't wait forever if it does not.
i=0
while kill -0 $server 2>/dev/null && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done
kill $server 2>/dev/null
wait $server
srv=$?
echo "== client exit $client, server exit $srv"
[ $client -eq 0 ] && [ $srv -eq 0 ]
