#!/bin/sh
# t-guest-adopt: a QEMU guest whose disk is a namespace file keeps running
# fio verify while nvmefsd on the host is killed.  The host runs nvmefsd
# (a file-backed software controller) under the fd store stand-in
# (tests/helpers/fdstore.c) over /dev/fuse; QEMU's NVMe namespace is the
# namespace file, opened cache=none, aio=native (O_DIRECT Linux AIO into
# the FUSE file, as a VM host sets it up).  In the guest, the kernel's nvme
# driver and fio (host /usr over 9p) write and verify with crc32c in
# rounds until the host says stop; the host kills nvmefsd with SIGKILL
# GUEST_KILLS (2) times while fio runs.  Every kill must be adopted, and
# every fio round must end with no error and no verify failure (each
# round's longest write, the pause, is in the output).
: "${VM_TIMEOUT:=600}"
. "$(dirname "$0")/lib.sh"
vm_prepare
command -v fio >/dev/null || skip "fio missing on the host (scripts/deps.sh installs it)"
for b in nvmefsd tools/fdstore; do
	[ -x "$BUILD/$b" ] || make -C "$ROOT" B="$BUILD" "$BUILD/$b" > /dev/null 2>&1 || fail "building $b failed"
done
KILLS=${GUEST_KILLS:-2}
W=$(mktemp -d /tmp/nvmefs-gadopt.XXXXXX)
MNT=$W/mnt
SHARE=$W/share
mkdir -p "$MNT" "$SHARE"
LOG=$BUILD/test-logs/vm-guest-adopt.daemon.log
GLOG=$BUILD/test-logs/vm-guest-adopt.guest.log
mkdir -p "$BUILD/test-logs"
: > "$LOG"
SPID=
cleanup() {
	[ -n "$SPID" ] && kill -TERM "$SPID" 2>/dev/null && wait "$SPID"
	umount -l "$MNT" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
cat > "$W/conf" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_mode = 0600
fuse_transport = classic
[controller nvme0]
device = sim
size = 128M
block_size = 512
backing = $W/%c-%n.img
exec = thread
EOF
"$BUILD/tools/fdstore" -p "$W/pid" -s "$W/notify" -a -n $((KILLS + 3)) -- \
	"$BUILD/nvmefsd" -f -c "$W/conf" >> "$LOG" 2>&1 &
SPID=$!
i=0
until grep -q "fdstore: stored fuse-state" "$LOG"; do
	i=$((i + 1))
	[ $i -gt 100 ] && { tail -n 20 "$LOG"; fail "nvmefsd did not start"; }
	sleep 0.1
done

# the guest: fio write + verify rounds until the host writes $SHARE/stop
cat > "$W/guest.sh" <<'GUEST_EOF'
dev=/dev/nvme0n1
i=0
while [ ! -b $dev ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
n=0
while [ ! -e /mnt/share/stop ]; do
	n=$((n + 1))
	fio --name=g$n --filename=$dev --ioengine=libaio --direct=1 --iodepth=16 \
		--bssplit=4k/50:16k/30:64k/20 --rw=randwrite --size=32M --offset=$(( (n % 3) * 32 ))M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --randseed=$n \
		--output-format=json --output=/tmp/fio.$n > /tmp/fio.err.$n 2>&1
	rc=$?
	# fio's error and its longest write (the pause a kill made)
	res=$(python3 -c 'import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
print(j["error"], "%.1f" % (j["write"]["clat_ns"]["max"] / 1e6))' /tmp/fio.$n)
	echo "round $n: fio exit $rc, error ${res% *}, longest write ${res#* } ms"
	[ $rc = 0 ] && [ "${res% *}" = 0 ] || { cat /tmp/fio.err.$n /tmp/fio.$n; exit 1; }
	touch /mnt/share/round.$n
done
echo "guest: $n rounds, all verified"
GUEST_EOF
vm_run "$GLOG" -U -s "$SHARE" -I "$MNT/nvme0n1" \
	-Q -set -Q drive.nvm1.cache.direct=on -Q -set -Q drive.nvm1.aio=native \
	-f "$W/guest.sh" > "$W/vm.out" 2>&1 &
VP=$!

# kill once the first round is under way, and again in a later round
k=0
r=1
while [ $k -lt "$KILLS" ]; do
	i=0
	while [ ! -e "$SHARE/round.$r" ]; do
		kill -0 $VP 2>/dev/null || break 2
		i=$((i + 1))
		[ $i -gt 6000 ] && break 2
		sleep 0.1
	done
	sleep 1
	DPID=$(cat "$W/pid")
	kill -9 "$DPID"
	k=$((k + 1))
	j=0
	while [ "$(grep -c "the kernel resends the requests" "$LOG")" -lt $k ]; do
		j=$((j + 1))
		[ $j -gt 150 ] && { kill $VP; fail "kill $k: not adopted within 15 s"; }
		sleep 0.1
	done
	r=$((r + 1))
done
# one more round after the last kill, then stop
i=0
while [ ! -e "$SHARE/round.$((r + 1))" ] && kill -0 $VP 2>/dev/null && [ $i -lt 6000 ]; do
	i=$((i + 1))
	sleep 0.1
done
touch "$SHARE/stop"
wait $VP
vrc=$?
cat "$W/vm.out"
grep -E "adopting|resends|not adopting" "$LOG"
[ $k = "$KILLS" ] || fail "$k kills done of $KILLS (the guest ended early)"
[ $vrc = 0 ] || fail "the guest failed (exit $vrc)"
expect "$GLOG" "guest: [0-9]+ rounds, all verified" "the guest did not finish its rounds"
grep -q "not adopting" "$LOG" && fail "an adoption was refused"
[ "$(grep -c "adopting FUSE connection" "$LOG")" = "$KILLS" ] || fail "not every kill was adopted"
grep -E "fdstore: pid [0-9]+ exited [1-9]" "$LOG" && fail "a run failed"
echo "PASS: the guest verified every fio round across $KILLS kills of nvmefsd"
exit 0
