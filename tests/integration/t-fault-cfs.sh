#!/bin/sh
# t-fault-cfs.sh - controller fatal status (CSTS.CFS) under fio randrw crc32c
# verify: the engine sees CFS, resets the controller and resubmits what was
# in flight.  The reset clears the fault in the device, so fio must end with
# no error and no verify mismatch; cfs_events and resets_ok count it; the
# controller is live and dd + cmp works.  Prints the time from the injection
# to the first good read.
. "$(dirname "$0")/fault-lib.sh"
# 1 s: this fault needs no timeout, and a busy machine must not time a
# command out meanwhile (a reset then fails what it holds)
IO_TIMEOUT=1000
fault_start
fault_fio 8
t0=$(now_ms)
ctl inject nvme0 cfs > /dev/null || fail "inject cfs"
fio_wait
[ "$FIO_ERR" = 0 ] || fail "fio error $FIO_ERR after a CFS (want 0: the reset and resubmission cover it)"
wait_state live 30
probe_stop
echo "measure: cfs: first good probe $(probe_gap "$t0") ms after the injection; fio error $FIO_ERR"
echo "measure: cfs_events=$(rstat cfs_events) resets=$(rstat resets_started)/$(rstat resets_ok)/$(rstat resets_failed) resubmitted=$(rstat resubmitted) failed_after_retries=$(rstat failed_after_retries) reset_max_ms=$(rstat reset_max_ms)"
[ "$(rstat cfs_events)" -ge 1 ] || fail "cfs_events not counted"
[ "$(rstat resets_ok)" -ge 1 ] || fail "no successful reset counted"
dd_cmp || fail "dd + cmp after the CFS"
fault_stop
finish
