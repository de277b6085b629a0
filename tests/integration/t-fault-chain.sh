#!/bin/sh
# t-fault-chain.sh - faults back to back on the inline software controller
# with two reactors, each with its queue pair running beside the other and
# the copy thread (offload = 128K) moving the large commands: a delay
# past the timeout, the delay lifted, a controller fatal status, a hang,
# the hang lifted, then removal, under fio randrw crc32c verify at 4k-256k,
# iodepth 32 x 2 jobs.  CHAIN_ROUNDS (2) rounds.  After each: fio saw no
# verify mismatch (it ends with EIO at the removal, or 0), the controller is
# back after clear + attach, 4 MiB written before the chain read back
# identical, dd + cmp and a fresh fio verify pass, and large commands went
# through the copy thread.  On a machine with one CPU: one reactor.
. "$(dirname "$0")/fault-lib.sh"
if [ "$(nproc)" -ge 2 ]; then
	QUEUES=2 CPUS=0-1
	export QUEUES CPUS
fi
FAULT_EXEC=inline FAULT_OFFLOAD=128K
fault_start
dd_cmp || fail "baseline dd + cmp"
dd if=/dev/urandom of="$TMP/keep" bs=1M count=4 status=none
dd if="$TMP/keep" of="$F" bs=1M seek=56 oflag=direct conv=notrunc status=none || fail "write the 4 MiB kept"
big="--iodepth=32 --bsrange=4k-256k"
round=0
while [ $round -lt "${CHAIN_ROUNDS:-2}" ]; do
	round=$((round + 1))
	FIO_EXTRA=$big fio_start 40
	sleep 1.5
	ctl inject nvme0 delay 600 > /dev/null || fail "round $round: inject delay"
	sleep 1.2
	ctl inject nvme0 delay 0 > /dev/null || fail "round $round: lift the delay"
	sleep 0.3
	ctl inject nvme0 cfs > /dev/null || fail "round $round: inject cfs"
	sleep 0.5
	ctl inject nvme0 hang > /dev/null || fail "round $round: inject hang"
	sleep 1.2
	ctl inject nvme0 unhang > /dev/null || fail "round $round: lift the hang"
	sleep 0.3
	ctl inject nvme0 remove > /dev/null || fail "round $round: inject remove"
	wait_state removed 60
	fio_wait
	chain_err=$FIO_ERR
	case $FIO_ERR in 0 | 5) ;; *) fail "round $round: fio error $FIO_ERR" ;; esac
	ctl inject nvme0 clear > /dev/null || fail "round $round: inject clear"
	ctl attach --wait nvme0 > "$TMP/out" 2>&1 || fail "round $round: attach: $(cat "$TMP/out")"
	wait_state live 30
	timeout 10 dd if="$F" of="$TMP/keep.back" bs=1M skip=56 count=4 iflag=direct status=none ||
		fail "round $round: read the 4 MiB kept"
	cmp -s "$TMP/keep" "$TMP/keep.back" || fail "round $round: data written before the chain differs"
	dd_cmp || fail "round $round: dd + cmp after the chain"
	FIO_EXTRA=$big fio_start 4
	fio_wait
	[ "$FIO_ERR" = 0 ] || fail "round $round: fio verify after the chain: error $FIO_ERR"
	echo "measure: round $round: fio error $chain_err at the removal; timeouts=$(rstat timeouts)" \
		"resets=$(rstat resets_started)/$(rstat resets_ok)/$(rstat resets_failed)" \
		"removals=$(rstat removals) failed_after_retries=$(rstat failed_after_retries)"
done
# the large commands took the copy thread's path
off=$(sim_offloaded)
echo "measure: offloaded=$off"
[ "$off" != none ] && [ "$off" -gt 0 ] || fail "no command went through the copy thread"
fault_stop
finish
