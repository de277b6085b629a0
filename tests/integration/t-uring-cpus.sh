#!/bin/sh
# t-uring-cpus.sh - over io_uring the memory pinned for FUSE queue entries
# follows the CPUs that are online, and a CPU that comes online later gets
# its queue's whole depth.
# The kernel keeps a FUSE queue per possible CPU, and an offline CPU's
# callers send nothing, so its queue gets one entry (the kernel serves the
# ring only once every queue has one) instead of fuse_queue_depth, each a
# 1 MiB payload in the reactor's pinned DMA pool.  With the pool's request
# share set to 8 MiB (NVMEFS_POOL_MIB) and a depth of 16, one reactor:
#   both CPUs online:  8 + 2 x 16      = 40 MiB
#   CPU 1 offline:     8 + 16 + 1      = 25 MiB, "1 of offline CPUs"
# Then CPU 1 comes online: soon (30 s at most) its queue gets 15 more
# entries (ordinary memory, logged), and fio pinned to CPU 1 verifies at
# QD16 through them; their data is copied in user space (copy_bytes grows
# by at least what fio moved, where CPU 0's DMA entries copy nothing).
# Needs root and a CPU 1 that can go offline; only on FUSE over io_uring.
. "$(dirname "$0")/lib.sh"
lib_init
[ "${FUSE_TRANSPORT:-}" = uring ] || skip "only over io_uring (FUSE_TRANSPORT=uring)"
command -v python3 > /dev/null || skip "python3 is needed to read the JSON"
command -v taskset > /dev/null || skip "taskset missing (util-linux)"
ON=/sys/devices/system/cpu/cpu1/online
[ -w "$ON" ] && [ "$(cat $ON)" = 1 ] || skip "CPU 1 cannot be taken offline here ($ON)"
restore_cpu() { echo 1 > "$ON" 2>/dev/null; }
trap 'restore_cpu; lib_cleanup' EXIT
stat_of() { # KEY: a counter of stats' "fuse" object
	ctl stats --json > "$TMP/s.json" || return 1
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["fuse"][sys.argv[2]])' \
		"$TMP/s.json" "$1"
}
export NVMEFS_POOL_MIB=8
FUSE_QD=16 conf_sim nvme0 64M block_size=4096 backing=ram
possible=$(sed 's/.*-//' /sys/devices/system/cpu/possible)
[ "$possible" = 1 ] || skip "this test counts on CPUs 0-1 being all the possible ones (got $(cat /sys/devices/system/cpu/possible))"

# both online: 2 queues of 16
: > "$LOG"
daemon_start nvme0n1 || { fail "start"; finish; }
grep -q "dma: buffer pool of 40 MiB" "$LOG" || fail "both CPUs online: pool not 8 + 32 MiB: $(grep 'buffer pool of' "$LOG")"
grep -q "serving over io_uring (2 FUSE queues, 16 entries each; 0 of offline CPUs" "$LOG" ||
	fail "both online: $(grep 'serving over' "$LOG")"
daemon_stop

# CPU 1 offline: 16 + 1
echo 0 > "$ON" || skip "CPU 1 did not go offline"
[ "$(cat $ON)" = 0 ] || skip "CPU 1 did not go offline"
: > "$LOG"
daemon_start nvme0n1 || { fail "start with CPU 1 offline"; finish; }
grep -q "dma: buffer pool of 25 MiB" "$LOG" ||
	fail "CPU 1 offline: pool not 8 + 17 MiB: $(grep 'buffer pool of' "$LOG")"
grep -q "serving over io_uring (2 FUSE queues, 16 entries each; 1 of offline CPUs" "$LOG" ||
	fail "CPU 1 offline: $(grep 'serving over' "$LOG")"
F=$MNT/nvme0n1
head -c $((4 << 20)) /dev/urandom > "$TMP/data"
taskset -c 0 dd if="$TMP/data" of="$F" bs=64k oflag=direct conv=notrunc status=none || fail "write from CPU 0"
taskset -c 0 dd if="$F" of="$TMP/back" bs=64k count=64 iflag=direct status=none || fail "read from CPU 0"
cmp "$TMP/data" "$TMP/back" || fail "CPU 0: read back differs"

# CPU 1 comes online: its queue grows to 16
echo 1 > "$ON" || fail "CPU 1 did not come back online"
wait_until 30 grep -q "fuse: CPU 1 is online: its FUSE queue gets 15 more entries" "$LOG" ||
	fail "no growth of CPU 1's queue in 30 s"
c0=$(stat_of copy_bytes)
r0=$(stat_of ring_requests)
FIO_OUT=$TMP/fio1.json
taskset -c 1 fio --name=cpu1 --filename="$F" --ioengine=libaio --direct=1 --rw=randwrite \
	--bs=4k --iodepth=16 --size=16M --offset=32M --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
	--output-format=json --output="$FIO_OUT" > "$TMP/fio1.err" 2>&1 ||
	{ cat "$TMP/fio1.err"; fail "fio verify from CPU 1"; }
moved=$(python3 -c 'import json, sys
t = open(sys.argv[1]).read(); j = json.loads(t[t.index("{"):])["jobs"][0]
print(j["read"]["io_bytes"] + j["write"]["io_bytes"] if j["error"] == 0 else -1)' "$FIO_OUT")
[ "$moved" -ge $((32 << 20)) ] || fail "fio from CPU 1 moved $moved bytes, want the 16 MiB written and read back"
c1=$(stat_of copy_bytes)
r1=$(stat_of ring_requests)
[ $((r1 - r0)) -ge 8192 ] || fail "ring requests grew by $((r1 - r0)), want >= 8192"
# CPU 1's new entries are ordinary memory: its reads are copied (writes go
# out of a copy too, counted only for reads), CPU 0's DMA entries are not
[ $((c1 - c0)) -ge $((16 << 20)) ] ||
	fail "copy_bytes grew by $((c1 - c0)): CPU 1's requests did not come over its new entries"
grep -q "fuse: CPU 1 is online" "$LOG" && echo "$(grep -c . "$LOG") log lines; $(grep 'CPU 1 is online' "$LOG")"
daemon_stop
finish
