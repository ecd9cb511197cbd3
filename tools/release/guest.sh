# make guest-release: the release artifacts on a bare Debian guest (busybox sh).
# Runs inside the guest via `guestrun -script tools/release/guest.sh`, with the files
# the Makefile adds: /release/gorping.deb, /release/image-rootfs.tar (the OCI image's
# layers, flattened by `release unpack`) and /release/expect.env (what they must say).
#
# 1. dpkg -i the .deb into an empty dpkg database, check its files and its binary,
#    run it as a client against stock rping, start the agent as its systemd unit would
#    (with the packaged options and targets files), dpkg -r it (the configuration
#    stays), dpkg -P it and check that nothing is left. Then the maintainer scripts as
#    under systemd: install, upgrade, remove and purge with recording stand-ins for
#    systemctl and init-system-helpers' tools.
# 2. Unpack the image's file system and run its entrypoint as a client against stock
#    rping: in a chroot of the image, as a container runtime starts it, and as the
#    image's user (not root) with a 64 KiB memlock limit.
. /release/expect.env || exit 1
# Busybox's shell runs its own applets (dpkg, dpkg-deb among them) before PATH: the real
# dpkg is called by its path.
DPKG=/usr/bin/dpkg
DPKG_QUERY=/usr/bin/dpkg-query
st=0
fail() { echo "guest-release: FAIL: $*"; st=1; }
step() { echo "== $*"; }

# wait_listen PID: stock rping's rdma_cm id listens (up to 30 s; rping's id is created by
# its main thread, so its comm is rping).
wait_listen() {
	i=0
	until $GORPING_RDMA_TOOL resource show cm_id | grep "state LISTEN" | grep -q "comm rping"; do
		i=$((i+1))
		if [ $i -gt 300 ] || ! kill -0 "$1" 2>/dev/null; then
			echo "guest-release: stock rping is not listening"
			return 1
		fi
		sleep 0.1
	done
}

# wait_exit PID: the server exits once its client leaves (up to 30 s), with its status.
wait_exit() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.1; done
	kill "$1" 2>/dev/null
	wait "$1"
}

# ping_stock_rping WHAT CMD...: stock rping serves one client; CMD (a gorping client
# command without its -c -a -C options) pings it 3 times with -v -V.
ping_stock_rping() {
	what=$1
	shift
	rping -s -a "$GORPING_IPV4" -v > /tmp/server.out 2>&1 &
	server=$!
	wait_listen $server || { fail "$what: no server"; kill $server; return; }
	"$@" -c -a "$GORPING_IPV4" -C 3 -v -V > /tmp/client.out 2>&1
	c=$?
	wait_exit $server
	s=$?
	cat /tmp/client.out
	n=$(grep -c '^ping data: rdma-ping-[0-2]: ' /tmp/client.out)
	if [ $c -ne 0 ] || [ $s -ne 0 ] || [ "$n" != 3 ]; then
		fail "$what: client exit $c, stock rping server exit $s, $n of 3 ping data lines"
		cat /tmp/server.out
	else
		echo "$what: 3 validated pings with stock rping, both exit 0"
	fi
}

step "an empty dpkg database: nothing installed"
mkdir -p /var/lib/dpkg/info /var/lib/dpkg/updates /var/lib/dpkg/triggers /var/lib/dpkg/alternatives /var/log
: > /var/lib/dpkg/status
: > /var/lib/dpkg/available
$DPKG --version | head -1
[ -z "$($DPKG_QUERY -W 2>/dev/null)" ] || fail "packages before the install: $($DPKG_QUERY -W)"
before=$(find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /release \) -prune -o -print | sort)

step "dpkg -i gorping.deb"
$DPKG -i /release/gorping.deb || fail "dpkg -i exit $?"
status=$($DPKG_QUERY -W -f '${Status} ${Version} ${Architecture}' gorping)
echo "$status"
[ "$status" = "install ok installed $EXPECT_DEB_VERSION $($DPKG --print-architecture)" ] ||
	fail "dpkg-query: '$status', want 'install ok installed $EXPECT_DEB_VERSION ...'"
$DPKG -L gorping > /tmp/files
for f in /usr/bin/gorping /usr/share/man/man1/gorping.1.gz /usr/share/bash-completion/completions/gorping \
	/usr/share/zsh/vendor-completions/_gorping /usr/share/fish/vendor_completions.d/gorping.fish \
	/usr/share/doc/gorping/copyright; do
	grep -qx "$f" /tmp/files && [ -f "$f" ] || fail "$f not installed"
done
# The installed binary says what was built. (Called by its path: the test bed's own
# gorping is /usr/local/bin/gorping.)
out=$(/usr/bin/gorping --version)
echo "$out"
[ "$out" = "gorping $EXPECT_VERSION (rping-compatible, rdma-core 44 protocol)
commit $EXPECT_COMMIT" ] || fail "/usr/bin/gorping --version: $out"
/usr/bin/gorping devices || fail "gorping devices exit $?"
# What the completions offer after -a: this guest's Soft-RoCE addresses.
addrs=$(/usr/bin/gorping completion addresses | tr '\n' ' ')
echo "completion addresses: $addrs"
case " $addrs" in *" $GORPING_IPV4 "*) ;; *) fail "completion addresses: '$addrs' lacks $GORPING_IPV4";; esac
case " $addrs" in *" $GORPING_IPV6 "*) ;; *) fail "completion addresses: '$addrs' lacks $GORPING_IPV6";; esac

step "the installed gorping as a client of stock rping"
ping_stock_rping "installed /usr/bin/gorping" /usr/bin/gorping

step "the agent as gorping-mesh.service starts it: /etc/default/gorping-mesh, /etc/gorping/targets"
unit=/usr/lib/systemd/system/gorping-mesh.service
for f in $unit /etc/default/gorping-mesh /etc/gorping/targets; do
	grep -qx "$f" /tmp/files && [ -f "$f" ] || fail "$f not installed"
done
grep -qx 'ExecStart=/usr/bin/gorping mesh $GORPING_MESH_OPTIONS' $unit || fail "$unit: ExecStart is not gorping mesh \$GORPING_MESH_OPTIONS"
grep -qx 'EnvironmentFile=-/etc/default/gorping-mesh' $unit || fail "$unit does not read /etc/default/gorping-mesh"
# No systemd in this guest: the ExecStart line with the EnvironmentFile's options, as
# systemd runs it. It listens (metrics on :10174) and stops cleanly on SIGTERM.
(. /etc/default/gorping-mesh && echo "gorping mesh $GORPING_MESH_OPTIONS" && exec /usr/bin/gorping mesh $GORPING_MESH_OPTIONS) > /tmp/mesh.log 2>&1 &
mesh=$!
i=0
until wget -q -O /tmp/metrics http://127.0.0.1:10174/metrics 2>/dev/null && grep -q '^gorping_build_info' /tmp/metrics; do
	i=$((i+1))
	if [ $i -gt 300 ] || ! kill -0 $mesh 2>/dev/null; then
		fail "the packaged agent serves no /metrics on :10174 within 30 s"
		break
	fi
	sleep 0.1
done
grep '^gorping_build_info' /tmp/metrics
kill -TERM $mesh 2>/dev/null
wait $mesh
m=$?
cat /tmp/mesh.log
[ $m -eq 0 ] || fail "the packaged agent exit $m after SIGTERM"

step "dpkg -r gorping: only the configuration left; dpkg -P: nothing left"
$DPKG -r gorping || fail "dpkg -r exit $?"
status=$($DPKG_QUERY -W -f '${Status}' gorping 2>/dev/null)
[ "$status" = "deinstall ok config-files" ] || fail "after dpkg -r: status '$status', want deinstall ok config-files"
[ -f /etc/gorping/targets ] && [ -f /etc/default/gorping-mesh ] || fail "dpkg -r removed the configuration (conffiles)"
[ -e /usr/bin/gorping ] && fail "/usr/bin/gorping left after dpkg -r"
$DPKG -P gorping || fail "dpkg -P exit $?"
status=$($DPKG_QUERY -W -f '${Status}' gorping 2>/dev/null)
case "$status" in ""|"unknown ok not-installed"|"deinstall ok not-installed") ;; *) fail "after dpkg -P: status '$status'";; esac
while read -r f; do
	[ "$f" = /. ] && continue
	if [ -f "$f" ] || [ -L "$f" ]; then fail "$f left after dpkg -P"; fi
done < /tmp/files
after=$(find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /release \) -prune -o -print | sort)
# dpkg's own bookkeeping may stay (its logs and database files), nothing of gorping's.
left=$(echo "$after" | grep -vxF "$before" | grep -v '^/var/lib/dpkg/' | grep -v '^/var/log/dpkg.log$')
[ -z "$left" ] || fail "left after dpkg -P: $left"
[ -z "$(echo "$after" | grep -i gorping | grep -v '^/usr/local/bin/gorping$')" ] ||
	fail "gorping files left: $(echo "$after" | grep -i gorping)"

step "the maintainer scripts under systemd: dpkg -i, -i again (an upgrade), -r, -P"
# This guest has no systemd, and above the scripts did nothing. Here /run/systemd/system
# says systemd runs, and stand-ins for systemctl, deb-systemd-helper and
# deb-systemd-invoke record what the scripts ask of them (the host test runs them with
# Debian's own deb-systemd-helper too). deb-systemd-helper's state: /tmp/dsh-state (its
# update-state), /tmp/dsh-enabled (the admin's systemctl enable).
mkdir -p /run/systemd/system
for tool in systemctl deb-systemd-helper deb-systemd-invoke; do
	cat > /usr/bin/$tool <<EOF
#!/bin/sh
echo "$tool \$*" >> /tmp/systemd.calls
case "\$*" in
"debian-installed "*) [ -e /tmp/dsh-state ] ;;
"--quiet was-enabled "*) [ -e /tmp/dsh-enabled ] ;;
"update-state "*) : > /tmp/dsh-state ;;
"purge "*) rm -f /tmp/dsh-state /tmp/dsh-enabled ;;
esac
EOF
	chmod 755 /usr/bin/$tool
done
# calls WHAT WANT...: the lines recorded since the last check are WANT, in order.
calls() {
	what=$1
	shift
	got=$(cat /tmp/systemd.calls 2>/dev/null)
	want=$(for l in "$@"; do echo "$l"; done)
	echo "$what: $(echo "$got" | tr '\n' ';')"
	[ "$got" = "$want" ] || fail "$what: the scripts called
$got
want
$want"
	rm -f /tmp/systemd.calls
}
u=gorping-mesh.service
$DPKG -i /release/gorping.deb >/dev/null || fail "dpkg -i (systemd) exit $?"
calls "install: neither enabled nor started" "deb-systemd-helper debian-installed $u" \
	"deb-systemd-helper update-state $u" "systemctl --system daemon-reload"
: > /tmp/dsh-enabled # the admin: systemctl enable --now gorping-mesh
$DPKG -i /release/gorping.deb >/dev/null || fail "dpkg -i again (systemd) exit $?"
calls "upgrade: the admin's enable kept, a running agent restarted" "deb-systemd-helper debian-installed $u" \
	"deb-systemd-helper --quiet was-enabled $u" "deb-systemd-helper enable $u" "deb-systemd-helper update-state $u" \
	"systemctl --system daemon-reload" "deb-systemd-invoke try-restart $u"
$DPKG -r gorping >/dev/null || fail "dpkg -r (systemd) exit $?"
calls "remove: stopped, unit forgotten" "deb-systemd-invoke stop $u" "systemctl --system daemon-reload"
$DPKG -P gorping >/dev/null || fail "dpkg -P (systemd) exit $?"
calls "purge: enable links and their state removed" "deb-systemd-helper purge $u"
[ -e /tmp/dsh-state ] && fail "the purge left deb-systemd-helper's state"
rm -f /usr/bin/systemctl /usr/bin/deb-systemd-helper /usr/bin/deb-systemd-invoke
rmdir /run/systemd/system /run/systemd 2>/dev/null

step "the OCI image: its file system, its entrypoint, its user ($IMAGE_USER)"
mkdir -p /image && tar -xf /release/image-rootfs.tar -C /image || fail "unpack the image"
find /image -type f | sort
uid=${IMAGE_USER%%:*}
gid=${IMAGE_USER##*:}
[ "$uid" != 0 ] || fail "the image runs as root"
set -- $IMAGE_ENTRYPOINT
entry=$1
[ -x "/image$entry" ] || fail "entrypoint $entry is not in the image"
# The image's file system as the root, with /dev, /proc and /sys as a container runtime
# mounts them: the static binary needs nothing else.
mkdir -p /image/dev /image/proc /image/sys
mount -o bind /dev /image/dev && mount -t proc proc /image/proc && mount -t sysfs sys /image/sys ||
	fail "mounts for the image's root"
out=$(chroot /image "$entry" --version)
[ "$out" = "gorping $EXPECT_VERSION (rping-compatible, rdma-core 44 protocol)
commit $EXPECT_COMMIT" ] || fail "the image's gorping --version: $out"
ping_stock_rping "image $entry in a chroot of the image" chroot /image "$entry"
umount /image/sys /image/proc /image/dev
# As the image's user, which is not root: the device nodes' modes and the memlock limit
# decide. 64 KiB is the kernel's default memlock limit before 5.16 (8 MiB since).
ls -l /dev/infiniband/
echo "image:x:$uid:$gid:image user:/:/bin/sh" >> /etc/passwd
echo "image:x:$gid:" >> /etc/group
ping_stock_rping "image $entry as user $IMAGE_USER, memlock 64 KiB" \
	sh -c 'ulimit -l 64 && exec su -s /bin/sh image -c "id; ulimit -l; exec $*"' sh "/image$entry"

[ $st -eq 0 ] && echo "guest-release: PASS"
exit $st
