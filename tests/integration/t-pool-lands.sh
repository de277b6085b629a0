#!/bin/sh
# t-pool-lands.sh - the buffers a transport holds for good (/dev/fuse's
# landing buffers, io_uring's entries) are counted in the DMA pool: taken
# with the largest request's buffer held, so that it can always be had
# beside them.  With NVMEFS_POOL_MIB=1 (a pool that holds the landing
# buffers and 1 MiB more) a 1 MiB direct read and a 1 MiB write at an
# unaligned offset both succeed over /dev/fuse, with fewer landing buffers
# than fuse_queue_depth, as the log says (before, all of them were taken
# and the read failed with ENOMEM); over io_uring, where the entries cannot
# be fewer, the start is refused naming the largest request.
. "$(dirname "$0")/lib.sh"
lib_init
conf_sim nvme0 64M block_size=4096 backing=ram
F=$MNT/nvme0n1
if [ "${FUSE_TRANSPORT:-auto}" = uring ]; then
	NVMEFS_POOL_MIB=1 timeout 30 "$D" -f -c "$CONF" >> "$LOG" 2>&1
	rc=$?
	[ $rc = 1 ] || fail "a pool without room for the entries beside the largest request: exit $rc, want 1"
	grep -q "cannot hold its [0-9]* FUSE queue entries ([0-9]* MiB) beside the largest request" "$LOG" ||
		fail "the refusal does not name the largest request"
	finish
fi
NVMEFS_POOL_MIB=1 daemon_start nvme0n1 || { fail "start with a 1 MiB pool"; finish; }
head -c $((3 << 20)) /dev/urandom > "$TMP/data"
timeout 30 dd if="$TMP/data" of="$F" bs=1M count=2 oflag=direct conv=notrunc status=none ||
	fail "1 MiB direct writes"
timeout 30 dd if="$F" of="$TMP/back" bs=1M count=2 iflag=direct status=none ||
	fail "1 MiB direct reads"
cmp -s -n $((2 << 20)) "$TMP/data" "$TMP/back" || fail "1 MiB reads differ"
# 1 MiB at 4 MiB + 512: two partial blocks, the largest request's buffer
timeout 30 dd if="$TMP/data" of="$F" bs=1M count=1 seek=$(((4 << 20) + 512)) \
	oflag=direct,seek_bytes conv=notrunc status=none || fail "1 MiB unaligned write"
timeout 30 dd if="$F" of="$TMP/back2" bs=1M count=1 skip=$(((4 << 20) + 512)) \
	iflag=direct,skip_bytes status=none || fail "1 MiB unaligned read"
cmp -s -n $((1 << 20)) "$TMP/data" "$TMP/back2" || fail "1 MiB unaligned read differs"
grep -q "reads /dev/fuse writes into [0-9]* DMA buffers of 16 (the pool has no room for more beside the largest request" "$LOG" ||
	fail "no line saying how many landing buffers fit"
grep "DMA buffers of" "$LOG"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
