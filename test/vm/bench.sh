# make bench: wall and CPU time per ping for stock rping and gorping over
# Soft-RoCE in one guest, plus perftest's latency floor. Runs inside the guest
# (busybox sh) via `guestrun -script test/vm/bench.sh`.
#
# Each pairing runs BENCH_PINGS validated pings (-C N -V); the client's wall
# time and both processes' CPU time (user+sys, from busybox `time`) are divided
# by N. Rounds alternate the order of the pairings (BENCH_ROUNDS, default 2),
# so drift of the emulated machine shows up instead of favouring one tool.
# perftest's ib_send_lat (16 B, the advert size), ib_read_lat and ib_write_lat
# (64 B, the payload) give the data-path floor of one rping iteration:
# 4 SENDs + 1 READ + 1 WRITE = 4·t_send + t_read + t_write, with t_send and
# t_write perftest's one-way latencies and t_read its READ round trip (each
# perftest's t_typical, its median).
# Under TCG the figures measure the emulated CPU more than RDMA; compare them
# with each other, not with hardware.
A=$GORPING_IPV4
N=${BENCH_PINGS:-2000}
ROUNDS=${BENCH_ROUNDS:-2}
G=$GORPING_BIN
T=/tmp/bench
mkdir -p $T
port=9000

fail() { echo "bench: $*"; exit 1; }

# cpu FILE: user+sys seconds from `time -p -o FILE`.
cpu() { awk '$1=="user"||$1=="sys"{s+=$2} END{printf "%.2f", s}' "$1"; }
real() { awk '$1=="real"{print $2}' "$1"; }

wait_listen() {
	i=0
	until $GORPING_RDMA_TOOL resource show cm_id | grep "LISTEN" | grep -q ":$1 "; do
		i=$((i+1)); [ $i -gt 600 ] && fail "server did not listen on port $1"
		sleep 0.05
	done
}

# pair NAME SERVER-CMD CLIENT-CMD: one timed run; appends "NAME wall cpu_srv cpu_cli" to $T/results.
pair() {
	name=$1 srv=$2 cli=$3
	port=$((port+1))
	time -p -o $T/srv.t $srv -s -a $A -p $port >/dev/null 2>$T/srv.err &
	sp=$!
	wait_listen $port
	time -p -o $T/cli.t $cli -c -a $A -p $port -C $N -V >/dev/null 2>$T/cli.err ||
		{ cat $T/cli.err; fail "$name: client failed"; }
	wait $sp
	w=$(real $T/cli.t) cs=$(cpu $T/srv.t) cc=$(cpu $T/cli.t)
	echo "$name $w $cs $cc" >> $T/results
	awk -v n=$N -v name="$name" -v w=$w -v cs=$cs -v cc=$cc 'BEGIN{
		printf "  %-28s %6.0f µs/ping wall, CPU %6.0f server + %6.0f client = %6.0f µs/ping\n",
			name, w*1e6/n, cs*1e6/n, cc*1e6/n, (cs+cc)*1e6/n }'
}

# GID index of the IPv4 address (RoCE v2) on rxe0 port 1, for perftest's -x.
gid_index() {
	want=$(echo $A | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4}')
	for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		i=${f##*/}
		[ "$(cat $f 2>/dev/null)" = "$want" ] || continue
		[ "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ] && { echo $i; return; }
	done
	echo 0
}

# perf TOOL SIZE: perftest's t_typical (its median) in µs; appends "TOOL t_typical"
# to $T/results. The median, because one descheduled iteration can make t_avg
# meaningless (perftest prints "inf" when its clock overflows).
perf() {
	tool=$1 size=$2 x=$(gid_index)
	$tool -d rxe0 -i 1 -x $x -s $size -n 1000 >$T/perf-srv.out 2>&1 &
	ps=$!
	sleep 1
	i=0
	until $tool -d rxe0 -i 1 -x $x -s $size -n 1000 $A >$T/perf-cli.out 2>&1; do
		i=$((i+1)); [ $i -gt 10 ] && { cat $T/perf-cli.out; fail "$tool failed"; }
		sleep 1
	done
	wait $ps
	# The result row follows the header naming t_typical: bytes, iterations, t_min, t_max, t_typical, ...
	v=$(awk '/t_typical/ {h=1; next} h && $1 ~ /^[0-9]+$/ {print $5; exit}' $T/perf-cli.out)
	[ -n "$v" ] || { cat $T/perf-cli.out; fail "$tool: no result"; }
	echo "$tool $v" >> $T/results
	echo "  $tool -s $size: t_typical $v µs"
}

# pollrtt: gorping × gorping --poll with --stats; its median RTT (p50) is one
# iteration without the process start, connection setup and teardown that the
# wall time per ping includes, so it compares like for like with perftest's
# medians. Appends "pollp50 µs" to $T/results.
pollrtt() {
	port=$((port+1))
	$G --poll -s -a $A -p $port >/dev/null 2>$T/srv.err &
	sp=$!
	wait_listen $port
	$G --poll -c -a $A -p $port -C $N -V --stats >$T/stats.out 2>$T/cli.err ||
		{ cat $T/cli.err; fail "--poll --stats: client failed"; }
	wait $sp
	v=$(awk -F'p50/p99 = ' '/p50\/p99/ {split($2, a, "/"); printf "%.0f", a[1] * 1000}' $T/stats.out)
	[ -n "$v" ] || { cat $T/stats.out; fail "--poll --stats: no p50"; }
	echo "pollp50 $v" >> $T/results
	echo "  gorping×gorping --poll --stats: median RTT $v µs"
}

rm -f $T/results
command -v time >/dev/null || fail "no time applet"
echo "bench: $N validated pings per pairing, $ROUNDS rounds, $(uname -r) $(uname -m), $(nproc) CPUs"
cat > $T/pairs <<EOF
rping×rping|rping|rping
gorping×gorping|$G|$G
gorping×gorping --poll|$G --poll|$G --poll
rping×gorping|rping|$G
gorping×rping|$G|rping
EOF
# A/B (make bench-ab BEFORE=...): another build's gorping pairs in the same rounds, so
# the two trees meet the same drift of the emulated machine.
B=/usr/local/bin/gorping-before
if [ -x $B ]; then
	cat >> $T/pairs <<EOF
before: gorping×gorping|$B|$B
before: gorping×gorping --poll|$B --poll|$B --poll
EOF
fi
r=1
while [ $r -le $ROUNDS ]; do
	echo "round $r"
	# Odd rounds in the listed order, even rounds reversed.
	if [ $((r % 2)) -eq 1 ]; then cp $T/pairs $T/order; else awk '{l[NR]=$0} END{for(i=NR;i>0;i--) print l[i]}' $T/pairs > $T/order; fi
	while IFS='|' read -r name srv cli; do
		pair "$name" "$srv" "$cli" </dev/null
	done < $T/order
	pollrtt </dev/null
	perf ib_send_lat 16 </dev/null
	perf ib_read_lat 64 </dev/null
	perf ib_write_lat 64 </dev/null
	r=$((r+1))
done

# The table: means over the rounds, ratios against rping×rping and the floor.
echo
echo "summary (means over $ROUNDS rounds; µs per ping; ratios to rping×rping, --poll to the perftest floor):"
awk -v n=$N '
	/^ib_/ { perf[$1] += $2; pn[$1]++; next }
	/^pollp50 / { p50 += $2; p50n++; next }
	{ name = $1; for (i = 2; i < NF - 2; i++) name = name " " $i
	  if (!(name in cnt)) order[++k] = name
	  cnt[name]++; wall[name] += $(NF-2); cs[name] += $(NF-1); cc[name] += $NF }
	END {
		send = perf["ib_send_lat"] / pn["ib_send_lat"]; rd = perf["ib_read_lat"] / pn["ib_read_lat"]; wr = perf["ib_write_lat"] / pn["ib_write_lat"]
		floor = 4 * send + rd + wr
		bw = wall["rping×rping"] / cnt["rping×rping"] * 1e6 / n
		bc = (cs["rping×rping"] + cc["rping×rping"]) / cnt["rping×rping"] * 1e6 / n
		printf "| %-24s | %9s | %9s | %9s | %9s | %10s | %9s |\n", "server × client", "wall", "CPU srv", "CPU cli", "CPU total", "wall ratio", "CPU ratio"
		printf "|%s|%s|%s|%s|%s|%s|%s|\n", "--------------------------", "-----------", "-----------", "-----------", "-----------", "------------", "-----------"
		for (i = 1; i <= k; i++) {
			m = order[i]; c = cnt[m]
			w = wall[m] / c * 1e6 / n; s = cs[m] / c * 1e6 / n; l = cc[m] / c * 1e6 / n
			printf "| %-24s | %9.0f | %9.0f | %9.0f | %9.0f | %9.2fx | %8.2fx |\n", m, w, s, l, s + l, w / bw, (s + l) / bc
			if (m == "gorping×gorping --poll") pw = w
		}
		printf "\nperftest floor: 4 × ib_send_lat %.1f + ib_read_lat %.1f + ib_write_lat %.1f = %.0f µs per iteration\n", send, rd, wr, floor
		if (pw) printf "gorping×gorping --poll: %.0f µs wall per ping = %.2fx the floor (includes start, setup and teardown)\n", pw, pw / floor
		if (p50n) printf "gorping×gorping --poll --stats: median RTT %.0f µs = %.2fx the floor\n", p50 / p50n, p50 / p50n / floor
	}' $T/results

# A sample of --stats output (the README shows it).
echo
echo "sample: gorping -c -a $A -C 5 --stats (server gorping)"
port=$((port+1))
$G -s -a $A -p $port >/dev/null 2>&1 &
sp=$!
wait_listen $port
$G -c -a $A -p $port -C 5 --stats 2>/dev/null
wait $sp
