#!/bin/sh
# t-fuse-edges.sh - I/O at and past the end of a namespace, exact errnos
# (python3 os.pread/os.pwrite): a read at the end returns 0 bytes, one that
# crosses the end is short, one past it returns 0; a write at or past the end
# fails with ENOSPC and changes nothing; one crossing the end writes what fits
# and returns that count (a block device does the same); a write ending
# exactly at the end succeeds.  On a 4 KiB and a 512 B namespace.  Then
# statfs over namespaces whose sizes add up past 2^64 bytes: 16 null
# namespaces of 4 EiB give 2^54 blocks of 4 KiB, not a wrapped sum.
. "$(dirname "$0")/lib.sh"
lib_init
command -v python3 >/dev/null || skip "no python3"
conf_sim nvme0 8M namespaces=1 block_size=4096 backing=ram \
	-- sd 1M namespaces=1 block_size=512 backing=ram
daemon_start nvme0n1 sdn1 || { fail "start"; finish; }

for f in "$MNT/nvme0n1" "$MNT/sdn1"; do
	python3 - "$f" <<'PY' || fail "edge cases on $f"
import errno, os, sys
path = sys.argv[1]
fd = os.open(path, os.O_RDWR)
size = os.fstat(fd).st_size
bad = 0
def check(what, ok):
    global bad
    if not ok:
        print("FAIL:", path, what)
        bad += 1

pat = bytes((i * 7 + 3) & 0xff for i in range(9000))
# the last 9000 bytes hold a known pattern
check("pwrite ending at the end", os.pwrite(fd, pat, size - len(pat)) == len(pat))
check("read at the end is empty", os.pread(fd, 4096, size) == b"")
check("read past the end is empty", os.pread(fd, 4096, size + 123456) == b"")
r = os.pread(fd, 10000, size - 1000)
check("read crossing the end is short (%d)" % len(r), r == pat[-1000:])
r = os.pread(fd, 1, size - 1)
check("last byte", r == pat[-1:])
for off, n in ((size, 1), (size + 4096, 4096)):
    try:
        os.pwrite(fd, b"\xee" * n, off)
        check("pwrite %d@%d succeeded" % (n, off), False)
    except OSError as e:
        check("pwrite %d@%d: errno %d, want ENOSPC" % (n, off, e.errno), e.errno == errno.ENOSPC)
check("failed writes changed nothing", os.pread(fd, len(pat), size - len(pat)) == pat)
# across the end: short, what fits is written, the bytes before untouched
for off, n, v in ((size - 100, 200, 0xee), (size - 4096, 8192, 0xdd)):
    r = os.pwrite(fd, bytes([v]) * n, off)
    check("pwrite %d@%d across the end wrote %d, want %d" % (n, off, r, size - off), r == size - off)
    check("pwrite %d@%d: what fits is there" % (n, off), os.pread(fd, n, off) == bytes([v]) * (size - off))
    check("pwrite %d@%d: before it untouched" % (n, off),
          os.pread(fd, len(pat) - 4096, size - len(pat)) == pat[:len(pat) - 4096])
# small unaligned reads and writes everywhere near the end
for off, n in ((size - 4097, 3), (size - 513, 2), (size - 1, 1), (1, 1), (511, 2)):
    b = bytes([(off + n) & 0xff]) * n
    check("pwrite %d@%d" % (n, off), os.pwrite(fd, b, off) == n)
    check("pread %d@%d" % (n, off), os.pread(fd, n, off) == b)
check("zero-length write at the end", os.pwrite(fd, b"", size) == 0)
os.close(fd)
sys.exit(1 if bad else 0)
PY
done

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"

conf_sim big 4194304T namespaces=16 backing=null
daemon_start bign1 bign16 || { fail "start with 16 x 4 EiB"; finish; }
[ "$(stat -c %s "$MNT/bign16")" = 4611686018427387904 ] || fail "4 EiB file size"
set -- $(stat -f -c '%b %S' "$MNT")
[ "$1 $2" = "18014398509481984 4096" ] || fail "statfs over 16 x 4 EiB: $1 blocks of $2"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
