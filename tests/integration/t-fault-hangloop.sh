#!/bin/sh
# t-fault-hangloop.sh - a controller in a reset loop of its own (hang-loop:
# hung again at its first I/O command after every reset) for two resets
# (about 3 s) under fio
# randrw crc32c verify, with io_timeout_ms = 400: commands time out, the
# Abort is not answered, the engine resets the controller (its bring-up is
# answered), sends the commands again, and they time out again, over and
# over.  No read started during the loop completes before unhang (a plain
# hang would be ended by the first reset), the resets succeed and are
# counted, fio ends within its deadline without a verify mismatch (EIO only
# from spent retries), and after unhang the controller is live and dd + cmp
# and a fresh fio verify work.
. "$(dirname "$0")/fault-lib.sh"
fault_start
fault_fio 10
r0=$(rstat resets_ok)
t0=$(now_ms)
ctl inject nvme0 hang-loop > /dev/null || fail "inject hang-loop"
# the loop lasts until two resets are done (about 3 s; a busy machine's
# resets take longer, which is no failure), at most 60 s
resets_done() { [ $(($(rstat resets_ok) - r0)) -ge 2 ]; }
wait_until 60 resets_done || fail "fewer than 2 resets done in 60 s of the loop"
cp "$TMP/probe" "$TMP/probe.loop"
t1=$(now_ms)
r1=$(rstat resets_ok)
ctl inject nvme0 unhang > /dev/null || fail "inject unhang"
fio_wait
served=$(awk -v t0="$t0" '$1 >= t0 && $2 == 0 { n++ } END { print n + 0 }' "$TMP/probe.loop")
echo "measure: hang-loop $((t1 - t0)) ms: $((r1 - r0)) resets done, $served probe read(s) started in the loop and served before unhang"
[ "$served" = 0 ] || fail "$served probe read(s) were served during the reset loop"
far=$(rstat failed_after_retries)
fio_err_spent
if [ "$(ctl_state)" = failed ]; then
	echo "a reset failed: attach"
	ctl attach --wait nvme0 || fail "attach after a failed reset"
fi
wait_state live 30
probe_stop
echo "measure: first good probe $(probe_gap "$t1") ms after unhang; timeouts=$(rstat timeouts) aborts_sent=$(rstat aborts_sent) aborts_ok=$(rstat aborts_ok) resets=$(rstat resets_started)/$(rstat resets_ok)/$(rstat resets_failed) resubmitted=$(rstat resubmitted) failed_after_retries=$far"
[ "$(rstat aborts_ok)" = 0 ] || fail "an Abort was answered by a hung controller"
dd_cmp || fail "dd + cmp after unhang"
fio_start 4
fio_wait
[ "$FIO_ERR" = 0 ] || fail "fio verify after recovery: error $FIO_ERR"
fault_stop
finish
