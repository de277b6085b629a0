#!/bin/sh
# t-fuse-sigterm.sh - SIGTERM with I/O in flight: dd is writing and reading
# when the daemon gets SIGTERM; the daemon drains, unmounts and exits 0, the
# mountpoint is no longer a FUSE mount, and what dd had written before is
# intact after a restart over the same file-backed namespace.  A second run
# is stopped with SIGINT.
. "$(dirname "$0")/lib.sh"
lib_init
conf_sim nvme0 64M namespaces=1 block_size=4096 "backing=$TMP/ns-%n.img" exec=thread
daemon_start nvme0n1 || { fail "start"; finish; }
F=$MNT/nvme0n1
head -c $((4 << 20)) /dev/urandom > "$TMP/head"
dd if="$TMP/head" of="$F" bs=1M conv=notrunc,fsync status=none || fail "first write"
c0=$(completed)
# nocreat: a dd starting after the unmount must not create a plain file in
# the bare mountpoint directory
(while :; do dd if=/dev/urandom of="$F" bs=128k seek=64 count=256 oflag=direct conv=notrunc,nocreat \
	status=none 2>/dev/null || break; done) &
W=$!
(while :; do dd if="$F" of=/dev/null bs=1M iflag=direct status=none 2>/dev/null || break; done) &
R=$!
wait_io "$c0" 64
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "SIGTERM with I/O in flight: exit $DAEMON_RC"
fuse_mounted && fail "still a FUSE mount after SIGTERM"
sleep 0.5
kill $W $R 2>/dev/null
wait $W $R 2>/dev/null
grep -q "drained" "$LOG" || fail "no drain logged"
daemon_start nvme0n1 || { fail "restart"; finish; }
cmp -n $((4 << 20)) "$TMP/head" "$F" || fail "data lost across SIGTERM"
kill -INT "$DPID"
wait "$DPID"
rc=$?
DPID=
[ "$rc" = 0 ] || fail "SIGINT: exit $rc"
fuse_mounted && fail "still mounted after SIGINT"
finish
