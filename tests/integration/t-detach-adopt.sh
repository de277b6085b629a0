#!/bin/sh
# t-detach-adopt.sh - a namespace table changed at run time is not adopted.
# nvmefsd under the fd store stand-in with two file-backed controllers;
# nvme0 is detached and attached again (its files come back, but the next
# run would number them and their handles afresh), so the daemon replaces
# its state record: nvmefsctl restart is refused with the reason, and after
# kill -9 the next run refuses the connection (digest) and mounts afresh,
# serving both files with the data written before.  STATUS= follows the
# detach and the attach.  /dev/fuse only: an
# io_uring connection is never adopted (t-crash-adopt checks that refusal).
. "$(dirname "$0")/lib.sh"
lib_init
[ "${FUSE_TRANSPORT:-auto}" = uring ] && skip "io_uring connections are not adopted (t-crash-adopt checks the refusal)"
. "$(dirname "$0")/fdstore-lib.sh"
conf_sim nvme0 16M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread \
	-- nvme1 16M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread
store_start -n 2 || finish
files_within 5 "$MNT/nvme1n1" || fail "no nvme1n1"
head -c $((1 << 20)) /dev/urandom > "$TMP/a"
head -c $((1 << 20)) /dev/urandom > "$TMP/b"
dd if="$TMP/a" of="$MNT/nvme0n1" bs=1M oflag=direct conv=notrunc,fsync status=none || fail "write a"
dd if="$TMP/b" of="$MNT/nvme1n1" bs=1M oflag=direct conv=notrunc,fsync status=none || fail "write b"

# STATUS= (systemctl status) follows: ready, detached, attached again
st="fdstore: STATUS=serving 2 namespaces at $MNT"
served=$(grep -c "^$st\$" "$LOG")
[ "$served" -ge 1 ] || fail "no STATUS=serving line at READY=1"
ctl detach nvme0 > "$TMP/out" 2>&1 || fail "detach: $(cat "$TMP/out")"
wait_for "^fdstore: STATUS=serving 1 namespace at $MNT; nvme0 detached\$" 1 5 ||
	fail "STATUS= after the detach: $(grep 'STATUS=' "$LOG" | tail -n 1)"
ctl attach --wait nvme0 > "$TMP/out" 2>&1 || fail "attach: $(cat "$TMP/out")"
wait_for "^$st\$" $((served + 1)) 5 ||
	fail "STATUS= after the attach: $(grep 'STATUS=' "$LOG" | tail -n 1)"
grep -q "namespace table changed at run time (a controller detached): a run after a crash will mount afresh" "$LOG" ||
	fail "the state record was not replaced"
ctl restart > "$TMP/out" 2>&1 && fail "restart after a detach succeeded"
grep -q "the namespace files changed at run time" "$TMP/out" ||
	fail "restart refused without the reason: $(cat "$TMP/out")"

stores=$(grep -c "(classic) stored" "$LOG")
kill -9 "$DPID"
new_pid
wait_for "FUSE connection [0-9]* (classic) stored" $((stores + 1)) 15 ||
	fail "no fresh mount within 15 s"
grep -q "not adopting.*config digest" "$LOG" || fail "the connection was not refused for its digest"
grep -q "adopting FUSE connection" "$LOG" && fail "a changed table was adopted"
files_within 5 "$MNT/nvme0n1" || fail "no nvme0n1 after the restart"
files_within 5 "$MNT/nvme1n1" || fail "no nvme1n1 after the restart"
cmp -n $((1 << 20)) "$TMP/a" "$MNT/nvme0n1" || fail "nvme0's data lost"
cmp -n $((1 << 20)) "$TMP/b" "$MNT/nvme1n1" || fail "nvme1's data lost"
store_stop
finish
