# make bench (cross-host part): wall and CPU time per ping between two hosts
# (QEMU guests h1 and h2 on the test bed's virtual Ethernet), for stock rping
# and gorping in every pairing, and gorping --poll; plus the median RTT of
# gorping --stats. Runs on the host under `guestrun -hosts 2 -script`; gx runs
# each side in its guest, busybox `time` measures it there.
#
# BENCH_PINGS validated pings per pairing (default 500); BENCH_ROUNDS rounds
# (default 2) alternate the order of the pairings, so drift of the emulated
# machines shows instead of favouring one tool. Under TCG the figures measure
# the emulated CPUs and the virtual wire more than RDMA: compare them with
# each other.
set -u
S=$H2_IPV4
N=${BENCH_PINGS:-500}
ROUNDS=${BENCH_ROUNDS:-2}
port=9100
R=$(mktemp)
trap 'rm -f $R' EXIT
fail() { echo "bench: $*"; exit 1; }

# pair NAME SERVER CLIENT [CLIENT-FLAGS]: one timed run; appends
# "NAME wall cpu_srv cpu_cli" (seconds) to $R.
pair() {
	name=$1 srv=$2 cli=$3 flags=${4:-}
	port=$((port+1))
	gx -bg srv h2 sh -c "time -p -o /tmp/srv.t $srv -s -a $S -p $port >/dev/null 2>/tmp/srv.err; cat /tmp/srv.t" || fail "start $name"
	gx -timeout 60s -listen $S:$port h2 || fail "$name: server does not listen"
	out=$(gx -timeout 30m h1 sh -c "time -p -o /tmp/cli.t $cli -c -a $S -p $port -C $N -V $flags >/dev/null 2>/tmp/cli.err || { cat /tmp/cli.err; exit 1; }; cat /tmp/cli.t") ||
		fail "$name: client failed: $out"
	srvt=$(gx -timeout 5m -wait srv) || fail "$name: server failed"
	w=$(echo "$out" | awk '$1=="real"{print $2}')
	cc=$(echo "$out" | awk '$1=="user"||$1=="sys"{s+=$2} END{print s}')
	cs=$(echo "$srvt" | awk '$1=="user"||$1=="sys"{s+=$2} END{print s}')
	echo "$name $w $cs $cc" >> $R
	awk -v n=$N -v name="$name" -v w=$w -v cs=$cs -v cc=$cc 'BEGIN{
		printf "  %-30s %7.0f µs/ping wall, CPU %6.0f server + %6.0f client µs/ping\n", name, w*1e6/n, cs*1e6/n, cc*1e6/n }'
}

# median RTT of gorping --stats (its summary's p50) against a gorping server.
stats_p50() {
	flags=$1
	port=$((port+1))
	gx -bg srv h2 gorping -s -a $S -p $port $flags || fail "start stats server"
	gx -timeout 60s -listen $S:$port h2 || fail "stats server does not listen"
	p50=$(gx -timeout 30m h1 gorping -c -a $S -p $port -C $N -V --stats $flags | sed -n 's/.*p50\/p99 = \([0-9.]*\)\/.*/\1/p')
	gx -timeout 5m -wait srv >/dev/null || fail "stats server failed"
	echo "stats${flags// /} $p50" >> $R
	echo "  gorping --stats $flags: median RTT $p50 ms"
}

echo "== $N validated pings per pairing, server on h2 ($S), client on h1, $ROUNDS rounds"
G=gorping
for r in $(seq $ROUNDS); do
	echo "round $r"
	if [ $((r % 2)) -eq 1 ]; then order="rr gg gs sg gp"; else order="gp sg gs gg rr"; fi
	for p in $order; do
		case $p in
		rr) pair "rping x rping" rping rping ;;
		gg) pair "gorping x gorping" $G $G ;;
		gs) pair "gorping server x rping client" $G rping ;;
		sg) pair "rping server x gorping client" rping $G ;;
		gp) pair "gorping x gorping --poll" "$G --poll" $G --poll ;;
		esac
	done
	stats_p50 ""
	stats_p50 " --poll"
done
echo "== means over the rounds (ratio to rping x rping by wall and by CPU per ping)"
awk -v n=$N '
	$1 ~ /^stats/ { k=$1; p[k]+=$2; pc[k]++; next }
	{ k=$1; for (i=2; i<NF-2; i++) k=k" "$i; w[k]+=$(NF-2); c[k]+=$(NF-1)+$NF; m[k]++; if (!(k in ord)) { ord[k]=++no; key[no]=k } }
	END {
		base=w["rping x rping"]/m["rping x rping"]; basec=c["rping x rping"]/m["rping x rping"]
		for (i=1; i<=no; i++) { k=key[i]
			printf "  %-30s %7.0f µs/ping wall (%.2fx), %7.0f µs/ping CPU (%.2fx)\n", k, w[k]/m[k]*1e6/n, w[k]/m[k]/base, c[k]/m[k]*1e6/n, c[k]/m[k]/basec }
		for (k in p) printf "  %-30s median RTT %.3f ms\n", k, p[k]/pc[k]
	}' $R
