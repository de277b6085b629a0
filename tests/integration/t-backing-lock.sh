#!/bin/sh
# t-backing-lock.sh - one server per backing file.  A daemon serves a
# file-backed software controller and fio verifies on it; a second daemon
# (its own mountpoint and socket) configured with the same backing file is
# refused at start, exit 1 (start-up failed, nvmefsd(8)), naming the first
# daemon's pid, and mounts nothing, while the first serves on (fio ends
# with no error); so is a config whose two controllers share a file
# ("in use by this process").  A daemon killed with SIGKILL leaves no lock
# behind: the next one starts on the same file and finds the data.  Runs on
# the transport the suite selects.
. "$(dirname "$0")/lib.sh"
lib_init
command -v fio > /dev/null || skip "no fio"
conf_write <<EOC
[controller nvme0]
device = sim
size = 32M
block_size = 4096
backing = $TMP/shared-%n.img
EOC
cp "$CONF" "$TMP/one.conf"
daemon_start nvme0n1 || { fail "first daemon"; finish; }
P1=$DPID
head -c $((1 << 20)) /dev/urandom > "$TMP/mark"
dd if="$TMP/mark" of="$MNT/nvme0n1" bs=1M seek=30 oflag=direct conv=notrunc,fsync status=none ||
	fail "write the mark"
fio --name=v --filename="$MNT/nvme0n1" --ioengine=libaio --direct=1 --rw=randrw --bs=16k \
	--iodepth=8 --size=24M --runtime=600 --time_based=0 --loops=50 --verify=crc32c \
	--verify_fatal=1 --verify_state_save=0 --output-format=terse > "$TMP/fio.out" 2>&1 &
FP=$!

# the second daemon: the same backing file, its own mount and socket
sed -e "s|^mountpoint = .*|mountpoint = $TMP/mnt2|" -e "s|^admin_socket = .*|admin_socket = $TMP/admin2.sock|" \
	"$TMP/one.conf" > "$TMP/two.conf"
timeout 60 "$D" -f -c "$TMP/two.conf" > "$TMP/two.log" 2>&1
rc=$?
cat "$TMP/two.log" | grep -E "in use|error" | head -n 3
[ $rc = 1 ] || fail "second daemon: exit $rc, want 1"
grep -q "sim: backing file $TMP/shared-1.img is in use by pid $P1 ($(cat "/proc/$P1/comm")): two servers of one file would corrupt it" "$TMP/two.log" ||
	fail "second daemon: the refusal does not name the first: $(grep -i "backing" "$TMP/two.log")"
awk -v m="$TMP/mnt2" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo &&
	{ fail "second daemon left a mount"; umount -l "$TMP/mnt2"; }
[ -e "$TMP/admin2.sock" ] && fail "second daemon left its socket"
kill -0 "$P1" || fail "the first daemon is gone"

# two controllers of one daemon on one file
sed -e "s|^mountpoint = .*|mountpoint = $TMP/mnt2|" -e "s|^admin_socket = .*|admin_socket = $TMP/admin2.sock|" \
	-e "s|backing = .*|backing = $TMP/own-%n.img|" "$TMP/one.conf" > "$TMP/three.conf"
printf '[controller nvme1]\ndevice = sim\nsize = 32M\nblock_size = 4096\nbacking = %s/own-%%n.img\n' "$TMP" >> "$TMP/three.conf"
timeout 60 "$D" -f -c "$TMP/three.conf" > "$TMP/three.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "two controllers on one file: exit $rc, want 1"
grep -q "sim: backing file $TMP/own-1.img is in use by this process" "$TMP/three.log" ||
	fail "two controllers on one file: $(grep -i "backing" "$TMP/three.log")"

wait $FP
frc=$?
[ $frc = 0 ] || { cat "$TMP/fio.out"; fail "fio on the first daemon: exit $frc"; }
grep -q "verify" "$TMP/fio.out" && fail "fio verify: $(grep verify "$TMP/fio.out" | head -n 2)"
dd if="$MNT/nvme0n1" bs=1M skip=30 count=1 iflag=direct status=none | cmp -s - "$TMP/mark" ||
	fail "the first daemon's data"

# killed: the kernel drops the lock with the process; the next one starts
kill -9 "$P1"
wait "$P1" 2> /dev/null
DPID=
umount -l "$MNT" 2> /dev/null
: > "$LOG"
daemon_start nvme0n1 || fail "a daemon after SIGKILL of the first"
grep -q "in use" "$LOG" && fail "after SIGKILL: $(grep "in use" "$LOG")"
dd if="$MNT/nvme0n1" bs=1M skip=30 count=1 iflag=direct status=none | cmp -s - "$TMP/mark" ||
	fail "after SIGKILL: the data"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "stop: exit $DAEMON_RC"
finish
