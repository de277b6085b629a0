#!/bin/sh
# t-fault-sequence.sh - a sequence of faults, not a single one, under fio
# randrw crc32c verify (io_timeout_ms = 300, the threaded software
# controller): a delay past the timeout, a wait, clear, a wait, a controller
# fatal status.  Each fault alone recovers; this sequence used to leave the
# controller failed for good ("controller fatal status while waiting for the
# controller to become ready", every read EIO).  FAULTSEQ_ROUNDS (2) rounds
# with the waits from a seed (FAULTSEQ_SEED, 1): after each the controller must be live
# again within 30 s, fio must see no verify mismatch, and dd + cmp must work.
# (fio ends at its first error, typically during the delay; nothing reads
# between the clear and the cfs, as in the report: the engine must notice
# a controller that lost its enable on its own.)
# Prints, per round, the time from the last fault to the first good read.
. "$(dirname "$0")/fault-lib.sh"
IO_TIMEOUT=300
fault_start
dd_cmp || fail "baseline dd + cmp"
SEED=${FAULTSEQ_SEED:-1}
# waits in ms: after the delay 1000..4000, after the clear 1000..6000
ROUNDS=${FAULTSEQ_ROUNDS:-2}
WAITS=$(awk -v s="$SEED" -v n="$ROUNDS" 'BEGIN { srand(s); for (i = 0; i < n; i++)
	printf "%d:%d ", 1000 + int(rand() * 3000), 1000 + int(rand() * 5000) }')
round=0
for w in $WAITS; do
	round=$((round + 1))
	a=${w%:*} b=${w#*:}
	fio_start 12
	sleep 1
	ctl inject nvme0 delay 1000 > /dev/null || fail "round $round: inject delay"
	sleep "$(awk -v ms="$a" 'BEGIN { printf "%.3f", ms / 1000 }')"
	ctl inject nvme0 clear > /dev/null || fail "round $round: inject clear"
	sleep "$(awk -v ms="$b" 'BEGIN { printf "%.3f", ms / 1000 }')"
	t0=$(now_ms)
	ctl inject nvme0 cfs > /dev/null || fail "round $round: inject cfs"
	probe_start
	fio_wait
	wait_state live 30 || { probe_stop; break; }
	probe_stop
	echo "measure: round $round (delay, ${a} ms, clear, ${b} ms, cfs): state $(ctl_state), first good read $(probe_gap "$t0") ms after the cfs, fio error $FIO_ERR"
	dd_cmp || fail "round $round: dd + cmp after the sequence"
done
echo "measure: resets=$(rstat resets_started)/$(rstat resets_ok)/$(rstat resets_failed) cfs_events=$(rstat cfs_events) timeouts=$(rstat timeouts)"
[ "$(rstat cfs_events)" -ge 1 ] || fail "no CFS counted"
fault_stop
finish
