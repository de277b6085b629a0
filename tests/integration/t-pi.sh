#!/bin/sh
# t-pi.sh - namespaces with metadata and end-to-end protection information
# (PI) over the software controller, through the mount:
#   - served: Type 1 (16-bit guard, a file backing), Type 2 (64-bit guard,
#     PI first, extended LBA of just the PI), Type 3 (16 bytes of separate
#     metadata, PI last: MPTR at the queue's metadata buffer) and metadata
#     without PI; refused, with the reason in the log and no file: extended
#     metadata beyond the PI;
#   - fio writes and verifies each served file (crc32c, random 4-64 KiB):
#     no error, no protection error counted;
#   - a corrupted block (inject corrupt; and a byte changed in the data file
#     underneath), a misplaced write and a misplaced read: each read of it
#     fails with EIO for dd and for fio (never a verify mismatch: never the
#     wrong data), the neighbours read back intact, and stats and metrics
#     count one protection error each; Type 3, which has no reference tag,
#     returns a misplaced block (its documented limit).
# The faults are sent to the admin socket as JSON (nvmefsctl's inject does
# not name them).
# The plain daemon, not the audit build: the misplaced write below leaves
# the block it was meant for with its old data and valid protection
# information, which no PI format can refuse and which the audit (rightly)
# reports as a block that is not what was last written there.
NVMEFS_AUDIT=0
. "$(dirname "$0")/lib.sh"
lib_init
C=$BUILD/nvmefsctl
command -v fio >/dev/null || skip "no fio"
command -v python3 >/dev/null || skip "no python3"
mkdir -m 0700 "$TMP/data"
conf_write <<EOF
[controller p1]
device = sim
size = 64M
backing = $TMP/data/%c-%n.img
metadata_size = 8
pi_type = 1

[controller p2]
device = sim
size = 64M
block_size = 512
metadata_size = 16
metadata_layout = extended
pi_type = 2
pi_location = first
pi_guard = crc64

[controller p3]
device = sim
size = 64M
metadata_size = 16
pi_type = 3

[controller m0]
device = sim
size = 64M
metadata_size = 64

[controller x1]
device = sim
size = 64M
block_size = 512
metadata_size = 16
metadata_layout = extended
pi_type = 1
EOF
daemon_start p1n1 p2n1 p3n1 m0n1 || { fail "start"; finish; }

ctl() { timeout 20 "$C" -s "$TMP/admin.sock" "$@"; }
# admin REQUEST-JSON: one request on the admin socket, its reply on stdout;
# fails unless the reply is ok
admin() {
	python3 - "$TMP/admin.sock" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
r = s.makefile("r").readline()
print(r.strip())
sys.exit(0 if json.loads(r).get("ok") else 1)
PY
}
# prot CTRL: the controller's protection errors (its queue pairs' class
# "protection" in stats --json)
prot() {
	ctl stats --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(q["errors"]["protection"] for r in d["reactors"] for q in r["qpairs"]
          if q["controller"] == sys.argv[1]))' "$1"
}
# read_eio FILE BLOCK BS: one direct read of that block fails with EIO
read_eio() {
	dd if="$1" of="$TMP/got" bs="$3" skip="$2" count=1 iflag=direct 2> "$TMP/dd.err"
	rc=$?
	[ $rc != 0 ] && grep -q "Input/output error" "$TMP/dd.err"
}
# fio_eio FILE BS OFFSET: fio read verify of 64 blocks from OFFSET (bytes)
# ends with EIO (error 5), and fio saw no verify mismatch
fio_eio() {
	fio --name=v --filename="$1" --direct=1 --ioengine=psync --rw=read --bs="$2" \
		--offset="$3" --size=$((64 * $2)) --verify=pattern --verify_pattern=0x5a \
		--verify_only=1 --output-format=json --output="$TMP/fe.json" > "$TMP/fe.err" 2>&1
	grep -Eqi 'verify (failed|error)|bad magic|pattern: ' "$TMP/fe.err" "$TMP/fe.json" && return 1
	python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if j["jobs"][0]["error"] == 5 else 1)' "$TMP/fe.json"
}

# ---- what is served, what is refused and why
grep -q 'p1: namespace 1: protection information Type 1, 16-bit guard, in the last 8 of 8 bytes of separate metadata' "$LOG" ||
	fail "p1's format not logged as served"
grep -q 'p2: namespace 1: protection information Type 2, 64-bit guard, in the first 16 of 16 bytes of extended metadata' "$LOG" ||
	fail "p2's format not logged as served"
grep -q 'p3: namespace 1: protection information Type 3, 16-bit guard, in the last 8 of 16 bytes of separate metadata: the controller inserts it and checks the guard$' "$LOG" ||
	fail "p3's format not logged as served (Type 3: the guard only)"
grep -q 'm0: namespace 1: 64 bytes of separate metadata per block, no protection information' "$LOG" ||
	fail "m0's format not logged as served"
grep -q 'x1: namespace 1: 16 bytes of metadata per block beyond its protection information, extended .*skipped' "$LOG" ||
	fail "x1's refusal not logged with its reason"
[ -e "$MNT/x1n1" ] && fail "the refused namespace has a file"
[ "$(stat -c %s "$MNT/p2n1")" = $((64 << 20)) ] || fail "p2n1: st_size $(stat -c %s "$MNT/p2n1")"

# ---- fio writes and verifies each served format
for f in p1n1 p2n1 p3n1 m0n1; do
	fio --name=v --filename="$MNT/$f" --direct=1 --ioengine=libaio --rw=randwrite \
		--bsrange=4k-64k --iodepth=8 --size=8M --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --output-format=json --output="$TMP/fio.$f.json" \
		> "$TMP/fio.$f.err" 2>&1 || fail "$f: fio verify failed: $(head -c 300 "$TMP/fio.$f.err")"
	grep -Eqi 'verify (failed|error)|bad magic|crc32c: ' "$TMP/fio.$f.err" && fail "$f: fio saw a mismatch"
done
for c in p1 p2 p3 m0; do
	[ "$(prot $c)" = 0 ] || fail "$c: protection errors after a clean fio run: $(prot $c)"
done

# ---- a corrupted block: refused, never returned
# blocks 0..63 of p1 (4 KiB) hold 0x5a; fio's read verify of them expects it
dd if=/dev/zero bs=4096 count=64 2>/dev/null | tr '\0' '\132' > "$TMP/pat"
dd if="$TMP/pat" of="$MNT/p1n1" bs=4096 count=64 oflag=direct conv=notrunc 2>/dev/null ||
	fail "p1n1: writing the pattern"
"$BUILD/nvmefsctl" -s "$TMP/admin.sock" inject p1 corrupt 1 10 100 > /dev/null ||
	fail "nvmefsctl inject p1 corrupt 1 10 100"
read_eio "$MNT/p1n1" 10 4096 || fail "p1n1: the corrupted block read without EIO: $(cat "$TMP/dd.err")"
[ "$(prot p1)" = 1 ] || fail "p1: protection errors $(prot p1), want 1"
dd if="$MNT/p1n1" of="$TMP/got" bs=4096 skip=9 count=1 iflag=direct 2>/dev/null &&
	cmp -s "$TMP/got" "$TMP/pat" -n 4096 || fail "p1n1: block 9, next to the corrupted one, is not intact"
fio_eio "$MNT/p1n1" 4096 0 || fail "p1n1: fio's read of the corrupted block did not end with EIO: $(head -c 300 "$TMP/fe.err")"
[ "$(prot p1)" = 2 ] || fail "p1: protection errors $(prot p1), want 2"
grep -q 'p1/q1: read of namespace 1, LBA 10 + 1: end-to-end guard check error (status 0x282)' "$LOG" ||
	fail "the guard error was not logged with its LBA"

# ---- a byte changed in the backing file underneath the controller
python3 - "$TMP/data/p1-1.img" <<'PY' || fail "changing the backing file"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
b = os.pread(fd, 1, 20 * 4096 + 7)
os.pwrite(fd, bytes([b[0] ^ 0x01]), 20 * 4096 + 7)
os.close(fd)
PY
read_eio "$MNT/p1n1" 20 4096 || fail "p1n1: the block changed underneath read without EIO"
[ "$(prot p1)" = 3 ] || fail "p1: protection errors $(prot p1), want 3"

# ---- a misplaced write: the blocks it overwrote are refused (reference tag)
for c in p1 p2 p3; do
	bs=4096
	[ $c = p2 ] && bs=512
	p0=$(prot $c)
	# blocks 270..333 hold 0x5a, then a write meant for 284 lands on 300
	dd if="$TMP/pat" of="$MNT/${c}n1" bs=$bs seek=270 count=64 oflag=direct conv=notrunc 2>/dev/null
	admin "{\"cmd\":\"inject\",\"controller\":\"$c\",\"fault\":\"misdirect-write\",\"count\":1,\"blocks\":16}" > /dev/null ||
		fail "$c: inject misdirect-write"
	head -c $bs /dev/urandom > "$TMP/b.$c"
	dd if="$TMP/b.$c" of="$MNT/${c}n1" bs=$bs seek=284 count=1 oflag=direct conv=notrunc 2>/dev/null ||
		fail "$c: the misdirected write failed (the device cannot know)"
	if [ $c = p3 ]; then
		# Type 3 has no reference tag: the misplaced block reads back
		dd if="$MNT/${c}n1" of="$TMP/got" bs=$bs skip=300 count=1 iflag=direct 2>/dev/null ||
			fail "$c: Type 3 refused a misplaced block it cannot tell"
		cmp -s "$TMP/got" "$TMP/b.$c" || fail "$c: block 300 is not the misplaced write's data"
		[ "$(prot $c)" = "$p0" ] || fail "$c: a protection error without a reference tag"
		continue
	fi
	read_eio "$MNT/${c}n1" 300 $bs || fail "$c: the misplaced write's block read without EIO"
	[ "$(prot $c)" = $((p0 + 1)) ] || fail "$c: protection errors $(prot $c), want $((p0 + 1))"
	fio_eio "$MNT/${c}n1" $bs $((270 * bs)) ||
		fail "$c: fio over the misplaced block did not end with EIO: $(head -c 300 "$TMP/fe.err")"
done
grep -q 'p2/q1: read of namespace 1, LBA 300 + 1: end-to-end reference tag check error (status 0x284)' "$LOG" ||
	fail "the reference tag error was not logged with its LBA"

# ---- a misplaced read: the other blocks' reference tags refuse it
p0=$(prot p2)
dd if="$TMP/pat" of="$MNT/p2n1" bs=512 seek=400 count=16 oflag=direct conv=notrunc 2>/dev/null
"$BUILD/nvmefsctl" -s "$TMP/admin.sock" inject p2 misdirect-read 1 8 > /dev/null ||
	fail "nvmefsctl inject p2 misdirect-read 1 8"
read_eio "$MNT/p2n1" 400 512 || fail "p2n1: a misdirected read returned data"
dd if="$MNT/p2n1" of="$TMP/got" bs=512 skip=400 count=1 iflag=direct 2>/dev/null &&
	cmp -s -n 512 "$TMP/got" "$TMP/pat" || fail "p2n1: block 400 is not intact after the misdirected read"
[ "$(prot p2)" = $((p0 + 1)) ] || fail "p2: protection errors $(prot p2), want $((p0 + 1))"

# ---- the drive's own records: its error log and SMART media errors
ctl --json error-log p1 > "$TMP/errlog" || fail "nvmefsctl error-log p1"
grep -q 'end-to-end guard check error' "$TMP/errlog" || fail "p1's error log has no guard check error"
grep -q 'end-to-end reference tag check error' "$TMP/errlog" || fail "p1's error log has no reference tag check error"
me=$(ctl --json smart-log p1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["media_errors"])')
[ "$me" = "$(prot p1)" ] || fail "p1: SMART media_errors $me, protection errors $(prot p1)"

# ---- the metrics carry the same counts
ctl metrics > "$TMP/metrics" || fail "nvmefsctl metrics"
for c in p1 p2 p3; do
	m=$(awk -v c="controller=\"$c\"" 'index($0, "nvmefs_qpair_errors_total{") == 1 && index($0, c) &&
		index($0, "class=\"protection\"") { s += $NF } END { print s + 0 }' "$TMP/metrics")
	[ "$m" = "$(prot $c)" ] || fail "$c: metrics say $m protection errors, stats $(prot $c)"
done
echo "measure: protection errors p1=$(prot p1) p2=$(prot p2) p3=$(prot p3) m0=$(prot m0)"

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exit $DAEMON_RC"
finish
