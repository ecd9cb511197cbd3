# make bench-net: the cross-host round trip of one test-bed configuration
# (guestrun -hosts 2 with -net socket|switch and -cpus N; the Makefile runs
# each): gorping --stats's median and minimum RTT and stock rping's wall time
# per ping, BENCH_PINGS pings each (default 100). It found why two guests on
# QEMU's socket netdev took ~90 ms per ping (docs/multi-host.md).
set -u
S=$H2_IPV4
N=${BENCH_PINGS:-100}
fail() { echo "bench-net: $*"; exit 1; }
gx -bg srv h2 gorping -s -P -a $S -p 9200 || fail "server"
gx -timeout 60s -listen $S:9200 h2 || fail "server does not listen"
gx -bg rsrv h2 rping -s -P -a $S -p 9201 || fail "stock server"
gx -timeout 60s -listen $S:9201 h2 || fail "stock server does not listen"
gx -timeout 30m h1 gorping -c -a $S -p 9200 -C $N --stats | tail -1
out=$(gx -timeout 30m h1 sh -c "time -p rping -c -a $S -p 9201 -C $N -V 2>&1 >/dev/null") || fail "stock client: $out"
echo "$out" | awk -v n=$N '$1=="real"{printf "stock rping x rping: %.2f ms wall per ping\n", $2*1000/n}'
