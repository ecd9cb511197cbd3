# Hunts siw's first-ping hang (docs/siw-accept-race.md); runs inside the guest
# (busybox sh) via `guestrun -script test/vm/siw-first-ping.sh`, optionally with
# -siw-unpatched and -siw-accept-delay 30ms. Each round starts a server on siw0
# and a client -C 5 -V -v for every pairing (gorping/stock server x
# gorping/stock client), and counts clients that do not finish within 10 s.
# For a hung one it prints the TCP queues of both ends: the race leaves the
# client's first SEND unread in the server's socket. Settings go before the
# script: bin/guestrun -cmd "ROUNDS=3 LOAD=0; $(cat test/vm/siw-first-ping.sh)".
# Exit status 0 only if no client hung or failed.
ROUNDS=${ROUNDS:-100}
PAIRS=${PAIRS:-"gg sg gs ss"} # server then client: g gorping, s stock rping
LOAD=${LOAD:-1}               # 1: a busy loop in the guest competes for a vCPU
A=$GORPING_SIW_IPV4
R=$GORPING_RDMA_TOOL
if [ -z "$A" ]; then
	echo "siw-first-ping: this guest has no siw device"
	exit 1
fi
echo "siw-first-ping: $GORPING_SIW_DEV at $A, $ROUNDS rounds of: $PAIRS, load $LOAD"
hog=
if [ "$LOAD" = 1 ]; then
	(while :; do :; done) &
	hog=$!
fi
port=9000 n=0 hangs=0 bad=0 i=0
while [ $i -lt $ROUNDS ]; do
	i=$((i + 1))
	for pair in $PAIRS; do
		n=$((n + 1))
		port=$((port + 1))
		case $pair in g?) srv=$GORPING_BIN ;; *) srv=/usr/bin/rping ;; esac
		case $pair in ?g) cli=$GORPING_BIN ;; *) cli=/usr/bin/rping ;; esac
		size=$(((n * 37) % 2000 + 16))
		# Stock rping's server does not grow its buffer: -S covers every size.
		$srv -s -a "$A" -p $port -V -S 2100 >/tmp/s.out 2>/tmp/s.err &
		s=$!
		hex=$(printf '%04X' $port)
		# Listening means siw's TCP socket too: rdma_cm says LISTEN before iw_cm listens.
		j=0
		until $R resource show cm_id 2>/dev/null | grep "state LISTEN" | grep -q ":$port " &&
			awk '$4 == "0A"' /proc/net/tcp | grep -q ":$hex "; do
			j=$((j + 1))
			if [ $j -gt 300 ]; then
				echo "$pair port $port: the server is not listening after 15 s"
				break
			fi
			sleep 0.05
		done
		$cli -c -a "$A" -p $port -C 5 -S $size -V -v >/tmp/c.out 2>/tmp/c.err &
		c=$!
		j=0
		while kill -0 $c 2>/dev/null && [ $j -lt 100 ]; do
			j=$((j + 1))
			sleep 0.1
		done
		hung=0
		if kill -0 $c 2>/dev/null; then
			hung=1
			hangs=$((hangs + 1))
			echo "HANG $pair port $port size $size round $i: client printed $(grep -c 'ping data' /tmp/c.out) pings"
			# /proc/net/tcp: local, remote, state, tx_queue:rx_queue (hex bytes)
			grep -i ":$hex " /proc/net/tcp | awk '{print "  tcp", $2, $3, "st", $4, "tx:rx", $5}'
		fi
		kill -9 $c 2>/dev/null
		wait $c
		rc=$?
		pings=$(grep -c 'ping data' /tmp/c.out)
		if [ $hung = 0 ] && { [ $rc != 0 ] || [ $pings != 5 ]; }; then
			bad=$((bad + 1))
			echo "BAD $pair port $port: client exit $rc, $pings of 5 pings"
		fi
		j=0
		while kill -0 $s 2>/dev/null && [ $j -lt 50 ]; do
			j=$((j + 1))
			sleep 0.1
		done
		kill -9 $s 2>/dev/null
		wait $s 2>/dev/null
	done
	[ $((i % 10)) = 0 ] && echo "round $i: $n runs, $hangs hung, $bad failed"
done
[ -n "$hog" ] && kill $hog
echo "siw-first-ping: $n runs, $hangs hung, $bad failed"
[ $hangs = 0 ] && [ $bad = 0 ]
