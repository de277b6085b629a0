#!/bin/sh
# t-fault-stuck.sh - a wedged controller (inject stuck: it ignores a disable,
# a shutdown and a function reset) under fio randrw crc32c verify, then hung:
# the commands on it time out, the reset cannot disable it, so the engine
# cuts it off from memory (bus mastering off, its mappings removed) and only
# then answers those commands, with EIO; the controller is failed, a read
# fails at once; no verify mismatch, no hang.  After clear the engine's own
# retry brings it back (no attach needed) and the data reads back intact.
# Then wedged and hung again, SIGTERM: the stop ends within its bound
# (exit 3: commands were cancelled) instead of waiting for the device.
# Prints the time to EIO and from clear to live.
. "$(dirname "$0")/fault-lib.sh"
fault_start
dd_cmp || fail "baseline dd + cmp"

fio_start 20
fio_running
t0=$(now_ms)
ctl inject nvme0 stuck > /dev/null || fail "inject stuck"
ctl inject nvme0 hang > /dev/null || fail "inject hang"
wait_state failed 60
t1=$(now_ms)
fio_wait
[ "$FIO_ERR" = 5 ] || fail "fio error $FIO_ERR, want EIO (5) from the cut-off controller"
[ "$(rstat isolations)" -ge 1 ] || fail "no isolation counted"
grep -q "could not be disabled: cut off" "$LOG" || fail "the isolation is not logged"
timeout 10 dd if="$F" of=/dev/null bs=4k count=1 iflag=direct status=none 2> /dev/null &&
	fail "a read of the failed controller succeeded"
ctl inject nvme0 clear > /dev/null || fail "inject clear"
wait_state live 90
t2=$(now_ms)
echo "measure: stuck + hang: failed (cut off) $((t1 - t0)) ms after the injection; live $((t2 - t1)) ms after clear (retries: $(rstat resets_started) started, $(rstat resets_failed) failed)"
dd_cmp || fail "dd + cmp after the retry brought it back"

# wedged again: the stop is bounded
fio_start 30
fio_running
ctl inject nvme0 stuck > /dev/null || fail "inject stuck (2)"
ctl inject nvme0 hang > /dev/null || fail "inject hang (2)"
sleep 1
stop_within 110
dt=$STOP_MS rc=$DAEMON_RC
echo "measure: stop with a wedged, hung controller: ${dt} ms, exit $rc"
[ "$rc" = 3 ] || [ "$rc" = 0 ] || fail "exit $rc, want 3 (commands cancelled) or 0"
[ "$dt" -lt 105000 ] || fail "the stop took ${dt} ms, more than its 105 s bound"
fio_wait
fuse_mounted && fail "still mounted after the stop"
finish
