#!/bin/sh
# t-io-errors.sh - an I/O error returned to an application leaves a log
# line naming the file, the operation, its offset and length, the errno and
# the NVMe status; a flood of them is rate-limited per file (at most 10
# lines per 5 s, FSNS_ERR_LOG_*), every error either a line or counted in
# the next line of that file, and one file's flood does not silence
# another's.  The software controller fails the commands ("inject fail N
# 0x42xx": Do Not Retry, so each failure is one request's).  Runs on the
# transport the suite selects.
. "$(dirname "$0")/lib.sh"
lib_init
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no /usr/bin/python3"
conf_write <<EOF2
[controller nvme0]
device = sim
size = 16M
namespaces = 2
block_size = 4096
backing = ram
EOF2
daemon_start nvme0n1 nvme0n2 || { fail "start"; finish; }
CTL="$BUILD/nvmefsctl -s $TMP/admin.sock"

# one failed read, one failed write: their lines
$CTL inject nvme0 fail 1 0x4281 > "$TMP/out" 2>&1 || fail "inject: $(cat "$TMP/out")"
dd if="$MNT/nvme0n1" of=/dev/null bs=4096 skip=3 count=1 iflag=direct 2> "$TMP/err" &&
	fail "the read succeeded"
grep -q "Input/output error" "$TMP/err" || fail "read: not EIO: $(cat "$TMP/err")"
grep -Eq "nvme0n1: read of 4096 bytes at offset 12288 failed with EIO: NVMe status 0x4281 \(" "$LOG" ||
	fail "no log line for the failed read: $(grep nvme0n1 "$LOG" | tail -n 3)"
$CTL inject nvme0 fail 1 0x4280 > "$TMP/out" 2>&1 || fail "inject: $(cat "$TMP/out")"
dd if=/dev/zero of="$MNT/nvme0n1" bs=8192 seek=1 count=1 oflag=direct conv=notrunc 2> "$TMP/err" &&
	fail "the write succeeded"
grep -Eq "nvme0n1: write of 8192 bytes at offset 8192 failed with EIO: NVMe status 0x4280 \(" "$LOG" ||
	fail "no log line for the failed write: $(grep nvme0n1 "$LOG" | tail -n 3)"
grep "failed with EIO" "$LOG" | sed "s/^.*nvmefsd: //"

# preads FILE N: N direct 4 KiB reads at offsets 0, 4096, ...: how many failed with EIO
preads() {
	"$PY" - "$1" "$2" <<'PY'
import errno, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buf, eio = mmap.mmap(-1, 4096), 0
for i in range(int(sys.argv[2])):
    try:
        os.preadv(fd, [buf], i * 4096)
    except OSError as e:
        eio += e.errno == errno.EIO
print(eio)
PY
}
# limited FROM-LINE: nvme0n1's error lines since then, and lines + their counts
limited() {
	sed -n "$1,\$p" "$LOG" | grep 'nvme0n1: read of .* failed with EIO' |
		awk '{ n++; if (match($0, /and [0-9]+ more I\/O errors/)) s += substr($0, RSTART + 4, RLENGTH - 19) }
		END { printf "%d %d\n", n, n + s }'
}
N=300
L0=$(($(wc -l < "$LOG") + 1))
T0=$(date +%s)
$CTL inject nvme0 fail $N 0x4281 > "$TMP/out" 2>&1 || fail "inject: $(cat "$TMP/out")"
got=$(preads "$MNT/nvme0n1" $N)
[ "$got" = $N ] || fail "flood: $got of $N reads failed with EIO"
# another file's error is logged whatever nvme0n1's flood did
$CTL inject nvme0 fail 1 0x4281 > "$TMP/out" 2>&1 || fail "inject: $(cat "$TMP/out")"
dd if="$MNT/nvme0n2" of=/dev/null bs=4096 count=1 iflag=direct 2> /dev/null && fail "nvme0n2: the read succeeded"
grep -q "nvme0n2: read of 4096 bytes at offset 0 failed with EIO" "$LOG" ||
	fail "nvme0n2's error was not logged after nvme0n1's flood"
# past the window, the next line carries what was left out
sleep 6
$CTL inject nvme0 fail 1 0x4281 > "$TMP/out" 2>&1 || fail "inject: $(cat "$TMP/out")"
[ "$(preads "$MNT/nvme0n1" 1)" = 1 ] || fail "the last read did not fail"
T1=$(date +%s)
set -- $(limited "$L0")
max=$((10 * ((T1 - T0) / 5 + 2)))
echo "flood: $((N + 1)) failed reads of nvme0n1: $1 lines (at most $max), accounting for $2"
[ "$2" = $((N + 1)) ] || fail "flood: the lines and their counts add up to $2, not $((N + 1))"
[ "$1" -le "$max" ] || fail "flood: $1 lines for $((N + 1)) errors in $((T1 - T0)) s (at most $max)"
# the files still work
dd if=/dev/urandom of="$TMP/a" bs=4096 count=4 status=none
dd if="$TMP/a" of="$MNT/nvme0n1" bs=4096 oflag=direct conv=notrunc status=none || fail "write after the errors"
cmp -n 16384 "$TMP/a" "$MNT/nvme0n1" || fail "read back after the errors"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"
finish
