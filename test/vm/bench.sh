# make bench: 2000 validated pings between each pairing of stock rping and
# gorping over Soft-RoCE in the guest, timed. Runs inside the guest (busybox sh)
# via `guestrun -script test/vm/bench.sh`. Under TCG the figures measure the
# emulated CPU more than RDMA; compare them with each other, not with hardware.
A=$GORPING_IPV4
N=${BENCH_PINGS:-2000}
now() { read u _ < /proc/uptime; echo ${u%.*}${u#*.}; }   # centiseconds
for pair in "rping rping" "$GORPING_BIN $GORPING_BIN" "rping $GORPING_BIN" "$GORPING_BIN rping"; do
	set -- $pair
	srv=$1 cli=$2
	$srv -s -a $A -p 9000 >/dev/null 2>&1 &
	sp=$!
	i=0
	until $GORPING_RDMA_TOOL resource show cm_id | grep -q "LISTEN"; do
		i=$((i+1)); [ $i -gt 600 ] && { echo "bench: server did not listen"; exit 1; }
		sleep 0.05
	done
	s=$(now)
	$cli -c -a $A -p 9000 -C $N -V >/dev/null 2>&1 || { echo "bench: $cli failed"; exit 1; }
	e=$(now)
	wait $sp
	ms=$(( (e-s)*10 ))
	echo "server $(basename $srv), client $(basename $cli): $N pings in $ms ms ($(( ms*1000/N )) µs/ping)"
done
