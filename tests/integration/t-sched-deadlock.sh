#!/bin/sh
# t-sched-deadlock.sh - the reproducer of the scheduler deadlock: fio random
# writes of mixed sizes (1 KiB to 1 MiB, 512-byte aligned) at QD 256 on a
# 4 MiB region of one file (4 KiB blocks: most writes are read-modify-write
# and overlap).  Before the scheduler kept lock holders apart from memory
# waiters, this stopped for good within a second.  Checks: fio (64 MiB of
# writes) ends within its deadline with no error, requests did wait for memory and for range
# locks (so the case was reached), bounce memory stayed within its bound, an
# unrelated 4 KiB read is answered, and SIGTERM exits 0.
. "$(dirname "$0")/lib.sh"
. "$ROOT/tests/helpers/sched-lib.sh"
lib_init
command -v fio >/dev/null || skip "no fio"
# over io_uring the FUSE queues' entries bound what is in flight (16 per
# CPU) and a block-aligned write needs no pool memory: a smaller pool brings
# the memory waits back
if [ "${FUSE_TRANSPORT:-auto}" != classic ]; then
	NVMEFS_POOL_MIB=4
	export NVMEFS_POOL_MIB
fi
QD=64 conf_sim nvme0 64M namespaces=1 block_size=4096 backing=ram exec=thread
daemon_start nvme0n1 || { fail "start"; finish; }
# an amount of I/O, not a time: on a busy machine a second of fio may not
# get enough requests in flight to reach the case
if fio_deadline 60 --name=deadlock --filename="$MNT/nvme0n1" --ioengine=libaio --direct=1 \
	--rw=randwrite --bssplit=1k/20:4k/20:16k/20:128k/20:1m/20 --ba=512 --iodepth=256 \
	--size=4m --norandommap --io_size=64m; then
	fio_json_ok || fail "fio reported errors"
	wm=$(fuse_stat waits_mem)
	wl=$(fuse_stat waits_lock)
	bp=$(fuse_stat bounce_peak)
	echo "waits for memory $wm, for range locks $wl, bounce peak $bp bytes"
	[ "${wm:-0}" -gt 0 ] || fail "no request waited for memory: the case was not reached"
	[ "${wl:-0}" -gt 0 ] || fail "no request waited for a range lock"
	[ "${bp:-0}" -le $((8 << 20)) ] || fail "bounce peak $bp above the 8 MiB bound"
	[ "$(fuse_stat inflight)" = 0 ] || fail "requests still in flight after fio"
	timeout 10 dd if="$MNT/nvme0n1" of=/dev/null bs=4k count=1 skip=5000 iflag=direct \
		2>/dev/null || fail "an unrelated 4 KiB read was not answered"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
else
	cat "$TMP/fio.err"
fi
finish
