#!/bin/sh
# t-fuse-crash.sh - kill -9 leaves a dead FUSE mount (ENOTCONN, or ECONNABORTED
# for a request caught by the abort over io_uring); a restart
# clears it with a lazy unmount and says so, and every byte written before
# an fsync is there (file-backed namespace).  The restart is done as the
# systemd unit does it (ExecStartPre's --check-config, then the daemon), over
# a dead mount twice in a row.  A mountpoint with something
# else mounted on it is refused: exit 1 with a message, nothing mounted.
. "$(dirname "$0")/lib.sh"
lib_init
conf_sim nvme0 32M namespaces=2 block_size=4096 "backing=$TMP/%c-%n.img" exec=thread
daemon_start nvme0n1 nvme0n2 || { fail "start"; finish; }
head -c $((24 << 20)) /dev/urandom > "$TMP/a"
head -c $((5 << 20)) /dev/urandom > "$TMP/b"
dd if="$TMP/a" of="$MNT/nvme0n1" bs=1M conv=notrunc,fsync status=none || fail "write n1"
dd if="$TMP/b" of="$MNT/nvme0n2" bs=4k seek=3 oflag=direct conv=notrunc,fsync status=none ||
	fail "write n2"
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
stat "$MNT" > /dev/null 2> "$TMP/stat.err" && fail "mountpoint usable after kill -9?"
# ECONNABORTED: a request caught in flight by the abort (io_uring)
grep -Eq "not connected|connection abort" "$TMP/stat.err" || fail "no ENOTCONN: $(cat "$TMP/stat.err")"
for cycle in 1 2; do
	"$D" --check-config -c "$CONF" > /dev/null 2>&1 ||
		fail "cycle $cycle: --check-config (the unit's ExecStartPre) fails over the dead mount"
	daemon_start nvme0n1 nvme0n2 || { fail "cycle $cycle: restart over the stale mount"; finish; }
	[ "$(grep -c "stale FUSE mount" "$LOG")" -ge $cycle ] || fail "cycle $cycle: stale mount not logged"
	cmp -n $((24 << 20)) "$TMP/a" "$MNT/nvme0n1" || fail "cycle $cycle: n1: fsync'd data lost"
	dd if="$MNT/nvme0n2" bs=4k skip=3 count=1280 status=none | cmp - "$TMP/b" ||
		fail "cycle $cycle: n2: fsync'd data lost"
	[ $cycle = 2 ] && break
	kill -9 "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=
	stat "$MNT" > /dev/null 2>&1 && fail "cycle $cycle: mountpoint usable after kill -9?"
done
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"

# busy: a tmpfs on the mountpoint
mount -t tmpfs nvmefs-test-busy "$MNT" || skip "cannot mount tmpfs"
"$D" -f -c "$CONF" > "$TMP/busy.log" 2>&1 &
P=$!
i=0
while kill -0 $P 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 $P 2>/dev/null; then
	kill -9 $P
	fail "daemon started over a busy mountpoint"
fi
wait $P
rc=$?
[ $rc = 1 ] || fail "busy mountpoint: exit $rc, want 1"
grep -q "busy" "$TMP/busy.log" || fail "busy mountpoint: no message: $(cat "$TMP/busy.log")"
cat "$TMP/busy.log" | grep busy
fuse_mounted && fail "mounted over the tmpfs"
umount "$MNT"
finish
