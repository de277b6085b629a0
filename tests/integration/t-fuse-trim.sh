#!/bin/sh
# t-fuse-trim.sh - fallocate --punch-hole and --zero-range read back as
# zeroes, with unaligned edges written by read-modify-write; the bytes around
# the range are untouched; the controller saw Write Zeroes commands and no
# Dataset Management (deallocation alone does not promise zeroes); plain
# fallocate (mode 0) is refused with EOPNOTSUPP.  On 4 KiB and 512 B
# namespaces.
. "$(dirname "$0")/lib.sh"
lib_init
command -v fallocate >/dev/null || skip "no fallocate (util-linux)"
command -v python3 >/dev/null || skip "no python3"
conf_sim nvme0 16M namespaces=1 block_size=4096 backing=ram \
	-- sd 16M namespaces=1 block_size=512 backing=ram
daemon_start nvme0n1 sdn1 || { fail "start"; finish; }
head -c $((16 << 20)) /dev/urandom > "$TMP/data"
for c in nvme0 sd; do
	F=$MNT/${c}n1
	cp "$TMP/data" "$TMP/model"
	dd if="$TMP/data" of="$F" bs=1M conv=notrunc status=none || fail "$c: fill"
	d0=$(sim_stat $c dsm)
	z0=$(sim_stat $c write_zeroes)
	# offset:length pairs: aligned, unaligned both ends, inside one block
	for op in p:1048576:2097152 p:5000:300000 z:4194305:1000001 z:8000100:200 p:12000000:7 z:0:4096; do
		m=${op%%:*} r=${op#*:}
		off=${r%:*} len=${r#*:}
		if [ "$m" = p ]; then
			fallocate -p -o "$off" -l "$len" "$F" || fail "$c: punch $off+$len"
		else
			fallocate -z -o "$off" -l "$len" "$F" || fail "$c: zero $off+$len"
		fi
		dd if=/dev/zero of="$TMP/model" bs=$len count=1 seek=$off oflag=seek_bytes \
			conv=notrunc status=none
	done
	cmp "$F" "$TMP/model" || fail "$c: contents differ from the model after punch/zero"
	d1=$(sim_stat $c dsm)
	z1=$(sim_stat $c write_zeroes)
	[ "$d1" = "$d0" ] || fail "$c: Dataset Management sent for punch/zero ($d0 -> $d1)"
	[ "$z1" -gt "$z0" ] || fail "$c: no Write Zeroes command ($z0 -> $z1)"
	python3 - "$F" <<'PY' || fail "$c: fallocate mode 0"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    os.posix_fallocate(fd, 0, 4096) if False else None
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.fallocate(fd, 0, ctypes.c_long(0), ctypes.c_long(4096))
    e = ctypes.get_errno()
    if r == 0 or e != errno.EOPNOTSUPP:
        print("FAIL: fallocate mode 0: r=%d errno=%d" % (r, e)); sys.exit(1)
finally:
    os.close(fd)
PY
done
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
