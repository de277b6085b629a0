#!/bin/sh
# t-reload-ctrl.sh - controllers added to or removed from the config are
# applied by a reload (nvmefsctl restart, which the unit's ExecReload runs)
# in the running daemon, without an outage, while fio (libaio, direct,
# iodepth 32, randwrite then a crc32c verify of all 48 MiB) writes the file
# of a controller that stays.  Under the fd-store stand-in, three software
# controllers on backing files:
#   - nvme2 added at the end of the config: its file appears (new inode,
#     written and read back), nvme0's and nvme1's inodes stay, nothing else
#     is touched; the table is still the one the config builds, so the
#     stored record follows it and a restart in place (re-exec) adopts the
#     mount afterwards (classic transport; over io_uring that restart is
#     refused as always);
#   - nvme1 removed from the config: its file goes, written data not yet
#     flushed reaches its backing file (a Flush per namespace, then CC.SHN),
#     its device is released, status shows it detached (not removed), and
#     a restart in place is refused from then on (the table changed) with
#     the reason;
#   - nvme1 named again with the same section: attached in its slot, its
#     file back in its inode with its data;
#   - a controller whose device does not exist: the reload answers
#     "adding", the log says it was not added, the mount is unaffected;
#   - a config that does not load: refused with its errors, nothing
#     changes.
# fio ends with error 0 and the whole verify; the daemon stops with 0.
# A reload of the same controllers with other settings (io_timeout_ms,
# log_level) replaces the daemon, which runs with them.
# Then, without fio: a daemon started with one controller and
# dma_isolation = controller refuses to add one (the reason says why), and
# with dma_isolation = shared adds it.
. "$(dirname "$0")/lib.sh"
lib_init
. "$(dirname "$0")/fdstore-lib.sh"
command -v fio >/dev/null || skip "fio missing"
command -v python3 >/dev/null || skip "python3 missing"
SEED=${RELOAD_SEED:-1}
FUSE_TRANSPORT=${FUSE_TRANSPORT:-classic}
[ "$FUSE_TRANSPORT" = auto ] && FUSE_TRANSPORT=classic
CTL="$BUILD/nvmefsctl -s $TMP/admin.sock"

# conf CTRL...: the config with a [controller] section per CTRL, in order
# (nvme0 holds fio's 48 MiB; "bad" is a PCI function that does not exist)
conf() {
	for c in "$@"; do
		if [ "$c" = bad ]; then
			printf '[controller nvme9]\ndevice = 0000:ff:1f.7\n'
			continue
		fi
		size=16M
		[ "$c" = nvme0 ] && size=64M
		cat <<EOF
[controller $c]
device = sim
size = $size
block_size = 4096
backing = $TMP/%c-%n.img
exec = thread
EOF
	done | conf_write
}

# reload: nvmefsctl restart, its output in $TMP/out (and here)
reload() {
	$CTL restart > "$TMP/out" 2>&1
	rl=$?
	echo "reload (exit $rl): $(cat "$TMP/out")"
	return $rl
}

# appears SECONDS FILE: FILE shows in the mount within SECONDS
appears() {
	i=0
	while [ ! -f "$2" ] && [ $i -lt $(($1 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	[ -f "$2" ]
}

ino() { stat -c %i "$1" 2>/dev/null; }

# rw FILE: 1 MiB written at 4 MiB (O_DIRECT) and read back the same
rw() {
	head -c $((1 << 20)) /dev/urandom > "$TMP/rw"
	timeout 30 dd if="$TMP/rw" of="$1" bs=1M seek=4 oflag=direct conv=notrunc status=none &&
		timeout 30 dd if="$1" of="$TMP/rwback" bs=1M skip=4 count=1 iflag=direct status=none &&
		cmp -s "$TMP/rw" "$TMP/rwback"
}

conf nvme0 nvme1
store_start -n 2 || finish
PID0=$DPID
ino0=$(ino "$MNT/nvme0n1")
ino1=$(ino "$MNT/nvme1n1")
fio_start reload 2000 120
sleep 1

# ---- added at the end: served without touching the others ----
conf nvme0 nvme1 nvme2
reload || fail "reload adding nvme2: $(cat "$TMP/out")"
grep -q "^nvme2: adding$" "$TMP/out" || fail "reload adding nvme2 says: $(cat "$TMP/out")"
appears 30 "$MNT/nvme2n1" || fail "nvme2n1 not in the mount 30 s after the reload"
rw "$MNT/nvme2n1" || fail "nvme2n1: write and read back"
[ "$(ino "$MNT/nvme0n1")" = "$ino0" ] && [ "$(ino "$MNT/nvme1n1")" = "$ino1" ] ||
	fail "inodes moved: nvme0n1 $ino0 -> $(ino "$MNT/nvme0n1"), nvme1n1 $ino1 -> $(ino "$MNT/nvme1n1")"
ino2=$(ino "$MNT/nvme2n1")
[ "$ino2" != "$ino0" ] && [ "$ino2" != "$ino1" ] || fail "nvme2n1 took inode $ino2"
grep -q "nvme2: added: 1 file" "$LOG" || fail "the addition is not logged"
$CTL namespaces | grep -q '^nvme2n1 ' || fail "namespaces lacks nvme2n1"
[ "$(cat "$TMP/pid")" = "$PID0" ] || fail "the daemon was replaced by the reload"
grep -q "restart: controllers shut down, exec" "$LOG" && fail "the reload re-executed the daemon"
kill -0 "$FP" 2>/dev/null || fail "fio ended before the restart (make it longer)"

# the table is the config's: a restart in place still adopts the mount
if [ "$FUSE_TRANSPORT" = classic ]; then
	grep -q "the namespace table grew at run time (a controller added) as the config now builds it" "$LOG" ||
		fail "the stored record does not follow the grown table"
	# the same controllers, other settings: the daemon is replaced and
	# runs with them
	IO_TIMEOUT=6000
	LOG_LEVEL=debug
	conf nvme0 nvme1 nvme2
	reload || fail "restart after the addition: $(cat "$TMP/out")"
	grep -q "re-executes" "$TMP/out" || fail "restart after the addition: $(cat "$TMP/out")"
	wait_for "adopting FUSE connection" 1 20 || fail "not adopted after the restart"
	wait_for "nvmefsd: info: ready:" 2 10 || fail "not ready after the restart"
	[ "$(ino "$MNT/nvme2n1")" = "$ino2" ] && [ "$(ino "$MNT/nvme0n1")" = "$ino0" ] ||
		fail "inodes moved across the restart"
	rw "$MNT/nvme2n1" || fail "nvme2n1 after the restart"
	$CTL config > "$TMP/cfg" 2>&1
	grep -q "^io_timeout_ms = 6000" "$TMP/cfg" && grep -q "^log_level = debug" "$TMP/cfg" ||
		fail "the replaced daemon does not run with the new settings: $(grep -E "io_timeout|log_level" "$TMP/cfg")"
fi

# ---- removed: flushed first, its file goes, its device is released ----
head -c $((4 << 20)) /dev/urandom > "$TMP/one"
# in nvme1's volatile write cache, not yet in its backing file
timeout 30 dd if="$TMP/one" of="$MNT/nvme1n1" bs=1M seek=8 oflag=direct conv=notrunc status=none ||
	fail "write nvme1n1 before its removal"
flushes=$(sim_stat nvme1 flushes)
conf nvme0 nvme2
reload || fail "reload removing nvme1: $(cat "$TMP/out")"
grep -q "^nvme1: removed, 1 file gone$" "$TMP/out" || fail "reload removing nvme1 says: $(cat "$TMP/out")"
[ -e "$MNT/nvme1n1" ] && fail "nvme1n1 still in the mount"
ls "$MNT" | grep -q nvme1n1 && fail "nvme1n1 still listed"
grep -q "nvme1: removed (removed from the config)" "$LOG" || fail "the removal is not logged"
grep -q "nvme1: detach: flushing the write cache" "$LOG" && fail "nvme1's flush failed: $(grep "nvme1: detach" "$LOG")"
[ "$(sim_stat nvme1 flushes)" -gt "${flushes:-0}" ] || fail "no Flush reached nvme1 before its removal"
grep -q "nvme1: shut down (CC.SHN normal)" "$LOG" || fail "nvme1 was not shut down"
# released: its image holds what was written, the daemon no longer has it open
cmp -s "$TMP/one" "$(dd if="$TMP/nvme1-1.img" bs=1M skip=8 count=4 status=none > "$TMP/img" && echo "$TMP/img")" ||
	fail "nvme1's data is not in its backing file after the removal"
$CTL status --json | python3 -c 'import json, sys; d = json.load(sys.stdin)
s = {c["name"]: c["state"] for c in d["controllers"]}
sys.exit(0 if s.get("nvme0") == "live" and s.get("nvme2") == "live" and s.get("nvme1") == "detached" else 1)' ||
	fail "status after the removal: $($CTL status)"
rw "$MNT/nvme2n1" || fail "nvme2n1 after nvme1's removal"
if [ "$FUSE_TRANSPORT" = classic ]; then
	reload && fail "a restart in place after a removal was accepted"
	grep -q "the namespace files changed at run time (a controller removed from the config)" "$TMP/out" ||
		fail "restart after the removal: $(cat "$TMP/out")"
fi

# ---- named again with the same section: attached, same inode, same data ----
conf nvme0 nvme2 nvme1
reload || fail "reload naming nvme1 again: $(cat "$TMP/out")"
grep -q "^nvme1: attaching$" "$TMP/out" || fail "reload naming nvme1 again says: $(cat "$TMP/out")"
appears 30 "$MNT/nvme1n1" || fail "nvme1n1 not back 30 s after the reload"
[ "$(ino "$MNT/nvme1n1")" = "$ino1" ] || fail "nvme1n1 came back as inode $(ino "$MNT/nvme1n1"), not $ino1"
timeout 30 dd if="$MNT/nvme1n1" of="$TMP/back" bs=1M skip=8 count=4 iflag=direct status=none &&
	cmp -s "$TMP/one" "$TMP/back" || fail "nvme1n1's data differs after it came back"

# ---- a device that is not there: answered, logged, nothing else moves ----
conf nvme0 nvme2 nvme1 bad
reload || fail "reload adding a missing device: $(cat "$TMP/out")"
grep -q "^nvme9: adding$" "$TMP/out" || fail "reload adding a missing device says: $(cat "$TMP/out")"
wait_for "nvme9: cannot open 0000:ff:1f.7 through VFIO.*not added" 1 20 || fail "the failed addition is not logged"
[ -e "$MNT/nvme9n1" ] && fail "nvme9n1 in the mount"
$CTL status --json | python3 -c 'import json, sys; d = json.load(sys.stdin)
sys.exit(0 if "nvme9" not in [c["name"] for c in d["controllers"]] else 1)' || fail "status shows nvme9"

# ---- a config that does not load: refused, nothing changes ----
printf '[controller nvme5]\nsize = 1M\n' >> "$CONF"
reload && fail "a reload of a broken config succeeded"
grep -q "the config $CONF does not load:$" "$TMP/out" && grep -q "^  .*nvme5" "$TMP/out" ||
	fail "broken config: $(cat "$TMP/out")"
[ -f "$MNT/nvme1n1" ] && [ -f "$MNT/nvme2n1" ] || fail "files changed by the refused reload"

fio_check
kill -0 "$DPID" 2>/dev/null || fail "the daemon is gone"
grep -q "fdstore: pid [0-9]* exited" "$LOG" && fail "the daemon exited: $(grep "exited" "$LOG")"
store_stop
[ "$SRC" = 0 ] || fail "stop: exit $SRC"
fuse_mounted && fail "still mounted after the stop"

# ---- one controller at start: the pools decide whether one can be added ----
for iso in controller shared; do
	DMA_ISOLATION=$iso
	conf nvme0
	daemon_start nvme0n1 || finish
	conf nvme0 nvme1
	if [ $iso = controller ]; then
		reload && fail "added next to one controller under dma_isolation = controller"
		grep -q "nvme1 is new, and dma_isolation = controller: the daemon started with one controller" "$TMP/out" ||
			fail "isolation refusal: $(cat "$TMP/out")"
		[ -e "$MNT/nvme1n1" ] && fail "nvme1n1 appeared after the refusal"
	else
		reload || fail "reload under dma_isolation = shared: $(cat "$TMP/out")"
		appears 30 "$MNT/nvme1n1" || fail "nvme1n1 not added under dma_isolation = shared"
		rw "$MNT/nvme1n1" || fail "nvme1n1 under dma_isolation = shared"
	fi
	rw "$MNT/nvme0n1" || fail "nvme0n1 after the reload (dma_isolation = $iso)"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "daemon exit $DAEMON_RC (dma_isolation = $iso)"
done
grep -E "Sanitizer|runtime error" "$LOG" && fail "sanitizer report"
finish
