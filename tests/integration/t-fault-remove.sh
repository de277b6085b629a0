#!/bin/sh
# t-fault-remove.sh - surprise removal of one of two controllers (inject
# remove: BAR0 reads all ones, DMA stops) under fio randrw crc32c verify.
# The engine finds the device gone, the daemon removes the controller: state
# removed, fio ends at once with EIO (never a verify mismatch, never a hang),
# every read of its file fails with EIO at once, the other controller's file
# keeps working, attach is refused until the device answers again (inject
# clear), then attach brings it back with its data and fio verifies again.
# A second removal is followed by SIGTERM: the daemon exits 0.
# Prints the time from the injection to the removal being seen and from
# attach to the first good read.
. "$(dirname "$0")/fault-lib.sh"
fault_start_two() {
	fault_init
	# 1 s: the removal needs no timeout, and a busy machine must not time
	# a command out before it (a reset then fails what it holds)
	IO_TIMEOUT=1000 conf_sim nvme0 64M block_size=4096 exec=thread \
		-- nvme1 16M block_size=4096 exec=thread
	daemon_start nvme0n1 nvme1n1 || { fail "start"; finish; }
	F=$MNT/nvme0n1
}
fault_start_two
F1=$MNT/nvme1n1
dd_cmp || fail "baseline dd + cmp"
cp "$TMP/data" "$TMP/before"
head -c $((1 << 20)) /dev/urandom > "$TMP/other"
dd if="$TMP/other" of="$F1" bs=1M oflag=direct conv=notrunc status=none || fail "write nvme1"

fio_start 20
fio_running
t0=$(now_ms)
ctl inject nvme0 remove > /dev/null || fail "inject remove"
wait_state removed 60
t1=$(now_ms)
fio_wait
t2=$(now_ms)
echo "measure: remove: state removed $((t1 - t0)) ms after the injection; fio ended $((t2 - t0)) ms after it, error $FIO_ERR"
[ "$FIO_ERR" = 5 ] || fail "fio error $FIO_ERR after a removal (want 5, EIO)"
[ $((t2 - t0)) -lt 60000 ] || fail "fio took $((t2 - t0)) ms to end after the removal"
grep -q "nvme0: removed" "$LOG" || fail "the removal is not logged"
[ "$(rstat removals)" -ge 1 ] || fail "removals not counted"
ctl namespaces | grep -Eq '^nvme0n1 +nvme0 +removed ' || fail "namespaces: nvme0n1 not shown removed"
ctl status | grep -Eq '^nvme1 +live ' || fail "status: nvme1 not live"

# reads fail at once with EIO (not after timeouts and retries); the file is
# still there
[ -f "$F" ] || fail "the removed controller's file is gone"
to0=$(rstat timeouts)
t0=$(now_ms)
timeout -s KILL 10 dd if="$F" of=/dev/null bs=4k count=1 iflag=direct 2> "$TMP/dd"
rc=$?
t1=$(now_ms)
[ $rc = 0 ] && fail "read of a removed controller succeeded"
grep -q "Input/output error" "$TMP/dd" || fail "read of a removed controller: $(cat "$TMP/dd")"
echo "measure: read of the removed controller's file failed (EIO) in $((t1 - t0)) ms"
[ "$(rstat timeouts)" = "$to0" ] || fail "the read of a removed controller waited for a timeout"
[ $((t1 - t0)) -lt 10000 ] || fail "the read took $((t1 - t0)) ms to fail"
# the other controller is untouched
timeout 10 dd if="$F1" of="$TMP/other.back" bs=1M count=1 iflag=direct status=none || fail "read nvme1"
cmp -s "$TMP/other" "$TMP/other.back" || fail "nvme1's data differs"

# attach: refused while the device still reads as removed, works after clear
ctl attach --wait nvme0 > "$TMP/out" 2>&1 && fail "attach while the device is gone succeeded"
grep -q "still reads as removed" "$TMP/out" || fail "attach while gone: $(cat "$TMP/out")"
ctl inject nvme0 clear > /dev/null || fail "inject clear"
t0=$(now_ms)
ctl attach --wait nvme0 > "$TMP/out" 2>&1 || fail "attach after clear: $(cat "$TMP/out")"
grep -q "nvme0: attached, live" "$TMP/out" || fail "attach reply: $(cat "$TMP/out")"
timeout 10 dd if="$F" of="$TMP/back" bs=1M skip=40 count=4 iflag=direct status=none || fail "read after attach"
t1=$(now_ms)
echo "measure: attach + first 4 MiB read: $((t1 - t0)) ms"
cmp -s "$TMP/before" "$TMP/back" || fail "data written before the removal differs after attach"
dd_cmp || fail "dd + cmp after attach"
fio_start 4
fio_wait
[ "$FIO_ERR" = 0 ] || fail "fio verify after attach: error $FIO_ERR"

# removed again, then SIGTERM: a clean stop
ctl inject nvme0 remove > /dev/null || fail "second inject remove"
timeout 10 dd if="$F" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
wait_state removed 60
fault_stop
finish
