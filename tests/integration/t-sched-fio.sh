#!/bin/sh
# t-sched-fio.sh - fio crc32c verify of overlapping mixed-size writes (1 KiB
# to 1 MiB at 512-byte alignment on a namespace of 4 KiB blocks, QD 256,
# libaio, direct) in poll, interrupt and hybrid modes with one reactor, in
# hybrid mode with two (CPUS=0,1 QUEUES=2), and with two reactors over 3 MiB
# DMA pools (NVMEFS_POOL_MIB: about one unaligned 1 MiB request at a time),
# each under a deadline: a hang fails the test instead of blocking it.  Then
# a 3 MiB pool must have made requests wait for memory.
. "$(dirname "$0")/lib.sh"
. "$ROOT/tests/helpers/sched-lib.sh"
lib_init
command -v fio >/dev/null || skip "no fio"
NCPU=$(getconf _NPROCESSORS_ONLN)

conf() {
	QD=64 conf_sim nvme0 32M namespaces=1 block_size=4096 backing=ram exec=thread
}

one() { # label
	conf
	daemon_start nvme0n1 || { fail "$1: start"; return; }
	echo "--- $1"
	mix_verify "$MNT/nvme0n1" 40 || return
	[ "$(fuse_stat inflight)" = 0 ] || fail "$1: requests still in flight"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "$1: daemon exited $DAEMON_RC"
}

for m in poll interrupt hybrid; do
	MODE=$m QUEUES=1 CPUS=0 one "$m, 1 reactor"
done
if [ "$NCPU" -ge 2 ]; then
	MODE=hybrid QUEUES=2 CPUS=0,1 one "hybrid, 2 reactors"
	NVMEFS_POOL_MIB=3 MODE=hybrid QUEUES=2 CPUS=0,1 one "hybrid, 2 reactors, 3 MiB pools"
else
	echo "one CPU: the two-reactor cases are left out"
	NVMEFS_POOL_MIB=3 MODE=hybrid one "hybrid, 1 reactor, 3 MiB pool"
fi

echo "--- 3 MiB pool, waits for memory"
QUEUES=1 CPUS=0 conf
export NVMEFS_POOL_MIB=3
if daemon_start nvme0n1 && fio_deadline 30 --name=pool --filename="$MNT/nvme0n1" \
	--ioengine=libaio --direct=1 --rw=randwrite --bssplit=1k/30:64k/30:1m/40 --ba=512 \
	--iodepth=256 --size=8m --norandommap --time_based --runtime=1; then
	fio_json_ok || fail "small pool: fio errors"
	wm=$(fuse_stat waits_mem)
	echo "3 MiB pool: $wm waits for memory"
	[ "${wm:-0}" -gt 0 ] || fail "small pool: nothing waited for memory"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "small pool: daemon exited $DAEMON_RC"
else
	fail "small pool run"
fi
finish
