#!/bin/sh
# t-fault-hang.sh - a controller that stops fetching commands (hang) for
# 1.5 s under fio randrw crc32c verify, with io_timeout_ms = 400: commands
# time out, the engine aborts (the hung device answers nothing), resets and
# resubmits.  fio must end within its deadline, never with a verify
# mismatch; an error, if any, only EIO from commands whose retries ran out
# (failed_after_retries then counts them).  After unhang the controller is
# live again (or, if its reset failed while hung, attached again), and
# dd + cmp works.  Prints the time from unhang to the first good read.
. "$(dirname "$0")/fault-lib.sh"
fault_start
fault_fio 10
t0=$(now_ms)
ctl inject nvme0 hang > /dev/null || fail "inject hang"
sleep 1.5
st=$(ctl_state)
t1=$(now_ms)
ctl inject nvme0 unhang > /dev/null || fail "inject unhang"
fio_wait
echo "state while hung (1.5 s): $st"
far=$(rstat failed_after_retries)
fio_err_spent
if [ "$(ctl_state)" = failed ]; then
	echo "the reset failed while hung: attach"
	ctl attach --wait nvme0 || fail "attach after a failed reset"
fi
wait_state live 30
sleep 0.5
probe_stop
echo "measure: hang 1.5 s: fio error $FIO_ERR; first good probe $(probe_gap "$t1") ms after unhang; $(probe_failures "$t0" "$t1") probe(s) failed while hung"
echo "measure: timeouts=$(rstat timeouts) aborts_sent=$(rstat aborts_sent) aborts_ok=$(rstat aborts_ok) resets=$(rstat resets_started)/$(rstat resets_ok)/$(rstat resets_failed) resubmitted=$(rstat resubmitted) failed_after_retries=$far reset_max_ms=$(rstat reset_max_ms)"
[ "$(rstat timeouts)" -gt 0 ] || fail "no timeout counted while hung"
dd_cmp || fail "dd + cmp after unhang"
fio_start 4
fio_wait
[ "$FIO_ERR" = 0 ] || fail "fio verify after recovery: error $FIO_ERR"
fault_stop
finish
