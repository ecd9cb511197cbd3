# make trace-doc: the --trace run docs/one-ping.md is made from. Runs inside the guest
# (busybox sh) via `guestrun -script test/vm/trace.sh`: a gorping server and a gorping
# client -C 2 -V over Soft-RoCE, both with --trace; each side's output is printed whole.
$GORPING_BIN -s -a "$GORPING_IPV4" --trace >/tmp/server.out 2>/tmp/server.err &
server=$!
# Wait (up to 30 s) until the server's rdma_cm id listens: no sleep-and-hope.
i=0
until $GORPING_RDMA_TOOL resource show cm_id | grep "state LISTEN" | grep -q "comm gorping"; do
	i=$((i+1))
	if [ $i -gt 300 ] || ! kill -0 $server 2>/dev/null; then
		echo "trace: gorping server is not listening"
		cat /tmp/server.err
		exit 1
	fi
	sleep 0.1
done
echo "== command: $GORPING_BIN -c -a $GORPING_IPV4 -C 2 -V --trace"
$GORPING_BIN -c -a "$GORPING_IPV4" -C 2 -V --trace >/tmp/client.out 2>/tmp/client.err
client=$?
i=0
while kill -0 $server 2>/dev/null && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done
kill $server 2>/dev/null
wait $server
srv=$?
echo "== client stdout"
cat /tmp/client.out
echo "== client stderr"
cat /tmp/client.err
echo "== server ($GORPING_BIN -s -a $GORPING_IPV4 --trace) stderr"
cat /tmp/server.err
echo "== client exit $client, server exit $srv"
[ $client -eq 0 ] && [ $srv -eq 0 ]
