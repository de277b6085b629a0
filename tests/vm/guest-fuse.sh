# guest-fuse.sh - in the guest (busybox sh, host /usr shared for fio, dd,
# cmp, fallocate, python3): nvmefsd over VFIO on the controller at $BDF,
# its namespace file checked through the FUSE mount.
#   sh guest-fuse.sh MODE [MARKER_IN MARKER_OUT]
# MODE is the engine mode (poll, interrupt, hybrid).  MARKER_IN, when not
# "-", must be the text at block 400000 (512 B units) when the daemon comes
# up (written by an earlier run: data survives a daemon restart over VFIO);
# MARKER_OUT is written there with fsync before the daemon is stopped.
# Checks: dd+cmp buffered and O_DIRECT, nvmefsctl smart-log, fw-log,
# error-log and list, a second daemon on the same device refused naming the
# first, fio crc32c verify, unaligned writes
# against a model, I/O at and past the end, fsync, punch hole / zero range,
# (with MARKER_IN) detach, the kernel driver reading the marker, attach,
# SIGTERM with dd in flight.  Prints "checks: N ok, M not ok"; exit 1 on a
# failed check.  Environment: NS_SIZE (bytes, required: the expected
# st_size), QUEUES (default 2) and CPUS (default: every CPU) for [engine],
# BDF (default 0000:00:01.0).
. /payload/check.sh
MODE=$1
MARKER_IN=${2:--}
MARKER_OUT=${3:--}
BDF=${BDF:-0000:00:01.0}
W=/tmp/nvmefs-$MODE
MNT=$W/mnt
CONF=$W/nvmefs.conf
LOG=$W/daemon.log
F=$MNT/nvme0n1
# busybox sh prefers its own applets: name the host's tools by path
DD=/usr/bin/dd CMP=/usr/bin/cmp FALLOCATE=/usr/bin/fallocate
mkdir -p "$W"
cat > "$CONF" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_owner = 0
file_group = 0
log_level = info
[engine]
queues = ${QUEUES:-2}
${CPUS:+cpus = $CPUS}
queue_depth = 64
mode = $MODE
io_timeout_ms = 30000
[controller nvme0]
device = $BDF
EOF
echo "== nvmefsd, mode $MODE"
nvmefsd -f -c "$CONF" > "$LOG" 2>&1 &
DPID=$!
# bring-up under TCG takes a moment: allow 60 s
i=0
while [ ! -f "$F" ] && [ $i -lt 600 ] && kill -0 $DPID 2>/dev/null; do usleep 100000; i=$((i + 1)); done
if [ ! -f "$F" ]; then
	c "daemon up, $F there" false
	cat "$LOG"
	kill -9 $DPID 2>/dev/null
	done_checks
fi
c "daemon up, $F there" true
sed 's/^/    daemon: /' "$LOG"
SIZE=$(stat -c %s "$F")
c "st_size is the namespace size ($SIZE)" [ "$SIZE" = "$NS_SIZE" ]

# --- a second daemon on the same device: refused at start (VFIO lets one
# process hold the group), naming the first; the first serves on
sed -e "s|^mountpoint = .*|mountpoint = $W/mnt2|" -e "s|^admin_socket = .*|admin_socket = $W/admin2.sock|" \
	"$CONF" > "$W/second.conf"
second() { timeout 120 nvmefsd -f -c "$W/second.conf"; echo $? > "$W/second.rc"; }
t "a second daemon on $BDF is refused, naming the first (pid $DPID)" ok \
	"$BDF: /dev/vfio/[0-9]+ is in use by pid $DPID \(nvmefsd\)" second
c "the second daemon exited 1 (start-up failed, nvmefsd(8)): $(cat "$W/second.rc")" \
	[ "$(cat "$W/second.rc")" = 1 ]
c "the second daemon mounted nothing" sh -c "! grep -q ' $W/mnt2 ' /proc/self/mountinfo"

if [ "$MARKER_IN" != - ]; then
	got=$($DD if="$F" bs=512 skip=400000 count=1 2>/dev/null | head -n 1)
	c "the previous run's marker is there (got '$got')" [ "$got" = "$MARKER_IN" ]
fi

# --- dd of random data in and cmp back, buffered and O_DIRECT
head -c $((16 << 20)) /dev/urandom > $W/data
t "dd 16 MiB buffered" ok "" $DD if=$W/data of="$F" bs=1M conv=notrunc status=none
t "cmp buffered" ok "" $CMP -n $((16 << 20)) $W/data "$F"
head -c $((16 << 20)) /dev/urandom > $W/data2
t "dd 16 MiB O_DIRECT at 32 MiB" ok "" $DD if=$W/data2 of="$F" bs=1M seek=32 oflag=direct conv=notrunc status=none
cmp_direct() { $DD if="$F" bs=1M skip=32 count=16 iflag=direct status=none | $CMP - $W/data2; }
t "cmp O_DIRECT read back" ok "" cmp_direct

# --- log pages from QEMU's controller through nvmefsctl: the 16 MiB just
# written O_DIRECT are in its data units (thousands of 512-byte units)
CTL="nvmefsctl -s $W/admin.sock"
t "smart-log shows the temperature" ok "^temperature +: -?[0-9]+ .+C \([0-9]+ K\)$" $CTL smart-log nvme0
$CTL --json smart-log nvme0 > $W/smart.json 2>&1
c "smart-log --json: data units written >= 33 after 16 MiB O_DIRECT" /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["ok"] and d["data_units_written"] >= 33 and d["temperature"] > 0 else 1)' $W/smart.json
t "fw-log: the active slot has a revision" ok "^frs[1-7] : [^ ]" $CTL fw-log nvme0
t "error-log answers" ok "^Error Log Entries for device:nvme0 " $CTL error-log nvme0
t "list: the controller over pcie" ok "^nvme0 .* live +pcie $BDF$" $CTL list
t "the buffered data is still there" ok "" $CMP -n $((16 << 20)) $W/data "$F"

# --- fio randrw 4K-128K, 2 jobs x QD16, crc32c verify, JSON: zero errors
fio_check() {
	fio --name=verify --filename="$F" --ioengine=libaio --direct=1 --rw=randrw \
		--bsrange=4k-128k --iodepth=16 --numjobs=2 --runtime=${FIO_SECS:-6} --time_based \
		--offset=64M --size=16M --offset_increment=16M --verify=crc32c --verify_backlog=64 \
		--verify_state_save=0 \
		--verify_fatal=1 --output-format=json --output=$W/fio.json > $W/fio.err 2>&1
	rc=$?
	cat $W/fio.err
	python3 - $W/fio.json $rc <<'PY'
import json, sys
t = open(sys.argv[1]).read()
d = json.loads(t[t.index("{"):])  # fio may print notes before the JSON
bad = int(sys.argv[2]) != 0
for j in d["jobs"]:
    r, w = j["read"], j["write"]
    print("fio job %s: error %d, read %d KiB %.0f IOPS, write %d KiB %.0f IOPS" % (
        j["jobname"], j["error"], r["io_bytes"] >> 10, r["iops"], w["io_bytes"] >> 10, w["iops"]))
    if j["error"] != 0 or r["io_bytes"] == 0 or w["io_bytes"] == 0:
        bad = True
print("fio jobs: %d" % len(d["jobs"]))
sys.exit(1 if bad or len(d["jobs"]) != 2 else 0)
PY
}
t "fio randrw 4K-128K 2x QD16 verify=crc32c" ok "fio jobs: 2" fio_check

# --- unaligned writes (bs=1000 at odd seeks) against a model of 2 MiB at 96 MiB
unaligned() {
	$DD if="$F" of=$W/model bs=1M skip=96 count=2 status=none || return 1
	for s in 1 7 333 1049 2047; do
		head -c 3000 /dev/urandom > $W/piece
		# the file offset is 96 MiB + s*1000: 96 MiB = 100663296 = 100663.296 * 1000,
		# so write with byte seeks to keep both at the same relative offset
		$DD if=$W/piece of="$F" bs=1000 seek=$((100663296 + s * 1000 + s)) oflag=seek_bytes \
			conv=notrunc status=none || return 1
		$DD if=$W/piece of=$W/model bs=1000 seek=$((s * 1000 + s)) oflag=seek_bytes \
			conv=notrunc status=none || return 1
	done
	$DD if="$F" bs=1M skip=96 count=2 status=none | $CMP - $W/model
}
t "unaligned dd bs=1000 at odd offsets match the model" ok "" unaligned

# --- at and past the end
edges() {
	python3 - "$F" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
size = os.fstat(fd).st_size
bad = 0
def check(what, ok):
    global bad
    print(("ok   " if ok else "FAIL ") + what)
    bad += not ok
pat = bytes((i * 7 + 3) & 0xff for i in range(9000))
check("pwrite ending at the end", os.pwrite(fd, pat, size - len(pat)) == len(pat))
check("read at the end returns 0 bytes", os.pread(fd, 4096, size) == b"")
check("read past the end returns 0 bytes", os.pread(fd, 4096, size + 65536) == b"")
r = os.pread(fd, 10000, size - 1000)
check("read across the end is short (%d bytes)" % len(r), r == pat[-1000:])
for off, n in ((size, 1), (size + 4096, 4096)):
    try:
        os.pwrite(fd, b"\xee" * n, off)
        check("pwrite %d@%d refused" % (n, off), False)
    except OSError as e:
        check("pwrite %d@%d: errno %d (ENOSPC)" % (n, off, e.errno), e.errno == errno.ENOSPC)
check("the refused writes changed nothing", os.pread(fd, len(pat), size - len(pat)) == pat)
# across the end: short, as on a block device; what fits is written
n = os.pwrite(fd, b"\xee" * 200, size - 100)
check("pwrite 200@%d across the end is short (%d bytes)" % (size - 100, n), n == 100)
check("... and wrote what fits", os.pread(fd, len(pat), size - len(pat)) == pat[:-100] + b"\xee" * 100)
os.close(fd)
sys.exit(1 if bad else 0)
PY
}
t "reads and writes at and past the end" ok "" edges

# --- fsync, punch hole and zero range (on a model of 4 MiB at 128 MiB)
t "dd conv=fsync" ok "" $DD if=/dev/urandom of="$F" bs=1M seek=128 count=4 conv=notrunc,fsync status=none
trim() {
	$DD if="$F" of=$W/tmodel bs=1M skip=128 count=4 status=none || return 1
	base=$((128 << 20))
	for op in p:0:1048576 p:1053001:300000 z:2097153:500001 z:3000000:4096 p:4000000:7; do
		m=${op%%:*} r=${op#*:}
		off=${r%:*} len=${r#*:}
		if [ $m = p ]; then
			$FALLOCATE -p -o $((base + off)) -l $len "$F" || { echo "punch $off+$len failed"; return 1; }
		else
			$FALLOCATE -z -o $((base + off)) -l $len "$F" || { echo "zero $off+$len failed"; return 1; }
		fi
		$DD if=/dev/zero of=$W/tmodel bs=$len count=1 seek=$off oflag=seek_bytes conv=notrunc status=none
	done
	$DD if="$F" bs=1M skip=128 count=4 status=none | $CMP - $W/tmodel || return 1
	# the punched 1 MiB really reads as zeroes (not only equal to the model)
	$DD if="$F" bs=1M skip=128 count=1 iflag=direct status=none | $CMP - /dev/zero -n 1048576
}
t "fallocate -p / -z read back as zeroes, the rest untouched" ok "" trim

# --- one controller serviced while the daemon runs (the second run): detach
# releases the VFIO device, the kernel's nvme driver takes it and reads the
# first run's marker, then it goes back to vfio-pci and attach serves the
# same file with its data
if [ "$MARKER_IN" != - ]; then
	t "detach" ok "^nvme0: detached, 1 file gone" $CTL detach nvme0
	c "... its file is gone" sh -c "! ls $MNT | grep -qx nvme0n1"
	t "vfio-bind --unbind gives it to nvme while nvmefsd runs" ok "bound to nvme \(was vfio-pci\)" \
		vfio-bind --unbind $BDF
	c "... /dev/nvme0n1 is there" wait_path /dev/nvme0n1
	got=$($DD if=/dev/nvme0n1 bs=512 skip=400000 count=1 iflag=direct 2>/dev/null | head -n 1)
	c "the kernel driver reads the first run's marker (got '$got')" [ "$got" = "$MARKER_IN" ]
	t "vfio-bind takes it back" ok "bound to vfio-pci \(was nvme\)" vfio-bind $BDF
	t "attach --wait" ok "nvme0: attached, live" $CTL attach --wait nvme0
	c "... the file is back" [ -f "$F" ]
	t "cmp O_DIRECT after attach" ok "" cmp_direct
fi

if [ "$MARKER_OUT" != - ]; then
	t "marker written with fsync" ok "" sh -c "echo '$MARKER_OUT' | $DD of='$F' bs=512 seek=400000 conv=notrunc,fsync status=none"
fi

# --- SIGTERM with dd in flight: exit 0, mount gone
(while :; do $DD if=/dev/urandom of="$F" bs=128k seek=1600 count=64 oflag=direct conv=notrunc \
	status=none 2>/dev/null || break; done) &
WR=$!
(while :; do $DD if="$F" of=/dev/null bs=1M count=16 iflag=direct status=none 2>/dev/null || break; done) &
RD=$!
sleep 2
kill -TERM $DPID
wait $DPID
rc=$?
c "SIGTERM with dd in flight: daemon exit 0 (got $rc)" [ $rc = 0 ]
c "... the mount is gone" sh -c "! grep -q ' $MNT ' /proc/mounts"
c "... after draining what was in flight" grep -q "drained: no request in flight" "$LOG"
kill $WR $RD 2>/dev/null
wait $WR $RD 2>/dev/null
tail -n 3 "$LOG" | sed "s/^/    daemon: /"
echo "== mode $MODE done"
echo "checks: $n_ok ok, $n_bad not ok"
[ $n_bad = 0 ]
