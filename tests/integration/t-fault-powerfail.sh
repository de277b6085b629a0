#!/bin/sh
# t-fault-powerfail.sh - a power cut of the software controller (write_cache
# = volatile, the default; inject powerfail): what the daemon made durable
# survives, what it did not is lost.  Data written with dd O_DIRECT and then
# fsync (NVMe Flush) reads back after the cut; data written without a sync
# reads back as what was there before (seed 0: every write not durable is
# lost); with a seed each 4 KiB block is the old or the new data, never
# anything else, and both kinds occur.  Data written with dd oflag=dsync
# (O_DSYNC: answered only once durable, FUA) survives too.  The engine finds
# the device gone on its own (state removed), attach powers it on, and it
# serves again.  Prints the time from the cut to the removal being seen and
# from attach to the first good read.
. "$(dirname "$0")/fault-lib.sh"
# 1 s: this fault needs no timeout, and a busy machine must not time a
# command out meanwhile (a reset then fails what it holds)
IO_TIMEOUT=1000
fault_start

# put FILE MIB SYNC: dd FILE at MIB MiB, O_DIRECT, then SYNC (fsync, dsync, none)
put() {
	case $3 in
	fsync) o="oflag=direct conv=notrunc,fsync" ;;
	dsync) o="oflag=direct,dsync conv=notrunc" ;;
	*) o="oflag=direct conv=notrunc" ;;
	esac
	# shellcheck disable=SC2086
	timeout 30 dd if="$TMP/$1" of="$F" bs=1M seek="$2" $o status=none || fail "write $1"
}

# same FILE MIB: the 4 MiB (or FILE's size) at MIB MiB equals FILE
same() {
	n=$(($(stat -c %s "$TMP/$1") >> 20))
	timeout 30 dd if="$F" of="$TMP/back" bs=1M skip="$2" count="$n" iflag=direct status=none ||
		{ fail "read at $2 MiB"; return 1; }
	cmp -s "$TMP/$1" "$TMP/back"
}

# power_cut [SEED]: inject powerfail, wait for the engine to remove the
# controller, attach it again
power_cut() {
	t0=$(now_ms)
	ctl inject nvme0 powerfail "$@" > "$TMP/out" 2>&1 || fail "inject powerfail: $(cat "$TMP/out")"
	grep -q "nvme0: powerfail (seed ${1:-0}" "$TMP/out" || fail "inject reply: $(cat "$TMP/out")"
	wait_state removed 30
	t1=$(now_ms)
	timeout 10 dd if="$F" of=/dev/null bs=4k count=1 iflag=direct 2> /dev/null &&
		fail "a read of a powered-off controller succeeded"
	ctl attach --wait nvme0 > "$TMP/out" 2>&1 || fail "attach after the cut: $(cat "$TMP/out")"
	grep -q "nvme0: attached, live" "$TMP/out" || fail "attach reply: $(cat "$TMP/out")"
	timeout 10 dd if="$F" of=/dev/null bs=4k count=1 iflag=direct status=none ||
		fail "read after attach"
	t2=$(now_ms)
	echo "measure: powerfail ${1:-0}: state removed $((t1 - t0)) ms after the cut; attach + first read $((t2 - t1)) ms"
}

for f in a b c d0 d1 e0 e1; do
	head -c $((4 << 20)) /dev/urandom > "$TMP/$f"
done
head -c $((4 << 20)) /dev/zero > "$TMP/zero"
# a Flush covers the whole namespace: the synced writes go first
put a 8 fsync  # durable: fsync sends Flush
put d0 32 fsync
put b 16 dsync # O_DSYNC: each write with FUA
put c 24 none  # over zeroes, never synced: lost
put d1 32 none # over durable data, not synced: d0 comes back
same c 24 || fail "the newest data is not what reads return before the cut"
power_cut
grep -q "sim nvme0: power cut (seed 0): [1-9][0-9]* cached blocks lost, 0 kept" "$LOG" ||
	fail "the cut is not logged: $(grep 'power cut' "$LOG")"
same a 8 || fail "data written and fsync'ed before the cut differs after it"
same zero 24 || fail "data never synced survived a cut with seed 0"
same d0 32 || fail "data overwritten without a sync: the durable version is not back"
same b 16 || fail "data written with O_DSYNC (acknowledged only once durable) differs after the cut"

# a seeded cut: each block old or new, both kinds, and the daemon serves on
put e0 40 fsync
put e1 40 none
power_cut 42
timeout 30 dd if="$F" of="$TMP/back" bs=1M skip=40 count=4 iflag=direct status=none ||
	fail "read after the seeded cut"
python3 - "$TMP/e0" "$TMP/e1" "$TMP/back" <<'PY' || fail "a seeded cut left a block neither old nor new, or not both kinds"
import sys
old, new, got = (open(p, "rb").read() for p in sys.argv[1:4])
n = len(got) // 4096
kinds = []
for i in range(n):
    b = got[i * 4096:(i + 1) * 4096]
    kinds.append("old" if b == old[i * 4096:(i + 1) * 4096] else
                 "new" if b == new[i * 4096:(i + 1) * 4096] else "other")
print("seeded cut: %d blocks old, %d new, %d other" %
      (kinds.count("old"), kinds.count("new"), kinds.count("other")))
sys.exit(0 if kinds.count("other") == 0 and kinds.count("old") and kinds.count("new") else 1)
PY
same a 8 || fail "fsync'ed data differs after the second cut"
[ "$(sim_stat nvme0 powerfails)" = 2 ] || fail "powerfails: $(sim_stat nvme0 powerfails), want 2"
dd_cmp || fail "dd + cmp after the seeded cut"
fio_start 3
fio_wait
[ "$FIO_ERR" = 0 ] || fail "fio verify after the cuts: error $FIO_ERR"
fault_stop
finish
