#!/bin/sh
# t-fuse-fsync.sh - fsync reaches the device: the software controller counts
# NVMe Flush commands (logged on SIGUSR1).  Writes without fsync and close
# send none; each dd conv=fsync sends one; fdatasync too.
. "$(dirname "$0")/lib.sh"
lib_init
conf_sim nvme0 16M namespaces=1 block_size=4096 backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
F=$MNT/nvme0n1
f0=$(sim_stat nvme0 flushes)
[ -n "$f0" ] || fail "no flushes counter in the stats line"
w0=$(sim_stat nvme0 writes)
dd if=/dev/urandom of="$F" bs=64k count=16 conv=notrunc status=none || fail "dd"
f1=$(sim_stat nvme0 flushes)
w1=$(sim_stat nvme0 writes)
[ "$f1" = "$f0" ] || fail "plain writes and close sent flushes ($f0 -> $f1)"
[ "$w1" -gt "$w0" ] || fail "writes not counted ($w0 -> $w1)"
dd if=/dev/urandom of="$F" bs=64k count=16 conv=notrunc,fsync status=none || fail "dd fsync"
f2=$(sim_stat nvme0 flushes)
[ "$f2" = $((f1 + 1)) ] || fail "dd conv=fsync: flushes $f1 -> $f2, want one more"
dd if=/dev/urandom of="$F" bs=4k count=1 conv=notrunc,fdatasync status=none || fail "dd fdatasync"
f3=$(sim_stat nvme0 flushes)
[ "$f3" = $((f2 + 1)) ] || fail "dd conv=fdatasync: flushes $f2 -> $f3, want one more"
echo "flushes: $f0 $f1 $f2 $f3"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
