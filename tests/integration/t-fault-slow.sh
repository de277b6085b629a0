#!/bin/sh
# t-fault-slow.sh - a controller slower than io_timeout_ms (400 ms here).
# 1. fio randrw with crc32c verify runs while every command takes 1 s for
#    1.5 s: commands time out, are aborted or reset and sent again (the
#    engine has 600 ms to see a timeout before the command would complete:
#    a busy machine may hold its reactor for a while; with 600 ms per
#    command, 200 ms of margin, it once saw none).  The device completes one
#    command at a time, so the last of a full queue is late by far more than
#    1 s: whether its io_retries (3) attempts last
#    until the slowness ends depends on the load of the host.  fio must end
#    with no error, or with EIO only when commands did run out of retries
#    (failed_after_retries > 0), and never with a verify mismatch.
# 2. A delay of 5 s holds: every attempt times out and the caller gets EIO
#    once the retries are spent (within a deadline); failed_after_retries
#    counts it.  Once the delay is lifted, dd + cmp works again.
# Prints the time from injection to the first successful probe read after
# the fault is lifted, for docs/operations.md.
. "$(dirname "$0")/fault-lib.sh"
fault_start
fault_fio 10
t0=$(now_ms)
ctl inject nvme0 delay 1000 > /dev/null || fail "inject delay 1000"
sleep 1.5
t1=$(now_ms)
ctl inject nvme0 delay 0 > /dev/null || fail "inject delay 0"
fio_wait
fio_err_spent
sleep 1
probe_stop
echo "measure: slow 1000 ms for 1.5 s: fio error $FIO_ERR; first good probe $(probe_gap "$t1") ms after the delay was lifted, $(probe_failures "$t0" "$t1") probe(s) failed during it"
to=$(rstat timeouts)
echo "measure: timeouts=$to aborts_sent=$(rstat aborts_sent) aborts_ok=$(rstat aborts_ok) resets=$(rstat resets_started)/$(rstat resets_ok) resubmitted=$(rstat resubmitted) failed_after_retries=$(rstat failed_after_retries) reset_max_ms=$(rstat reset_max_ms)"
[ "$to" -gt 0 ] || fail "no timeout counted while commands took 1000 ms"
[ "$(ctl_state)" = live ] || fail "state $(ctl_state) after the slowness, want live"

# retries run out: EIO, within a deadline, counted
f0=$(rstat failed_after_retries)
ctl inject nvme0 delay 5000 > /dev/null || fail "inject delay 5000"
t0=$(now_ms)
timeout -s KILL 60 dd if="$F" of=/dev/null bs=4k count=1 skip=100 iflag=direct 2> "$TMP/dd"
rc=$?
t1=$(now_ms)
[ $rc = 137 ] && fail "dd hung for 60 s on a slow device"
[ $rc = 0 ] && fail "dd succeeded although every attempt takes 5 s"
grep -q "Input/output error" "$TMP/dd" || fail "dd on a slow device: $(cat "$TMP/dd")"
echo "measure: delay 5 s held: dd read failed with EIO after $((t1 - t0)) ms"
ctl inject nvme0 delay 0 > /dev/null || fail "inject delay 0"
f1=$(rstat failed_after_retries)
[ "$f1" -gt "$f0" ] || fail "failed_after_retries did not move ($f0 -> $f1)"
wait_state live 30
t0=$(now_ms)
dd_cmp || fail "dd + cmp after the slowness ended"
echo "measure: dd + cmp of 4 MiB after the delay was lifted: $(($(now_ms) - t0)) ms"

fault_stop
finish
