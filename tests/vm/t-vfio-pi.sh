#!/bin/sh
# t-vfio-pi: nvmefsd over VFIO on QEMU's NVMe controller with namespaces of
# metadata and end-to-end protection information (QEMU's nvme-ns ms, mset,
# pi, pil, pif), in one boot (tests/vm/guest-pi.sh says what the guest
# checks):
#   1  4 KiB, ms=8,  pi=1                Type 1, 16-bit guard, metadata = PI
#   2  512 B, ms=8,  pi=2, mset=1        Type 2, extended LBA of just the PI
#   3  4 KiB, ms=16, pi=3, pil=1         Type 3, PI first of 16 (MPTR buffer)
#   4  4 KiB, ms=16, pi=1, pif=2         Type 1, 64-bit guard (ELBAF)
#   5  4 KiB, ms=64, pi=2, pif=2         Type 2, 64-bit guard, PI last of 64
#   6  4 KiB, ms=8                       metadata without PI (MPTR buffer)
#   7  512 B, ms=16, pi=1, mset=1        refused: extended beyond the PI
# fio verify on each served format; blocks changed and misplaced by this
# script in the image files while the guest runs (QEMU keeps each image's
# metadata after its data: blocks = size / (LBA size + ms)) are refused with
# EIO and counted, never returned (Type 3 cannot tell a misplaced block).
# The 64-bit guard formats use 4 KiB blocks: QEMU 7.2 writes the guard of a
# zeroed 4 KiB block alone for Write Zeroes, whatever the block size and the
# metadata before the PI, so Write Zeroes is checked on 1, 3 and 4 only.
# A DMA outside the mapped IOVAs fails the run (-D).
: "${VM_TIMEOUT:=600}"
. "$(dirname "$0")/lib.sh"
vm_prepare
mkdir -p "$BUILD/test-logs"
for b in nvmefsd nvmefsctl; do
	if [ ! -x "$BUILD/$b" ]; then
		make -C "$ROOT" B="$BUILD" "$BUILD/$b" > "$BUILD/test-logs/vm-pi.make.log" 2>&1 ||
			{ tail -n 20 "$BUILD/test-logs/vm-pi.make.log"; fail "building $b failed"; }
	fi
done
command -v fio >/dev/null || skip "fio missing on the host (scripts/deps.sh installs it)"
command -v python3 >/dev/null || skip "python3 missing on the host"
qemu-system-x86_64 -device nvme-ns,help 2>/dev/null | grep -q '^ *pif=' ||
	skip "this QEMU's nvme-ns has no pif (64-bit guard) property"
DIR=$VMBIN/pi
rm -rf "$DIR" && mkdir -p "$DIR"
cp "$BUILD/nvmefsd" "$BUILD/nvmefsctl" "$VM_HERE/guest-pi.sh" "$VM_HERE/guest/check.sh" "$DIR/"
SHARE=$(mktemp -d "${TMPDIR:-/tmp}/nvmefs-pi.XXXXXX")
LOG=$BUILD/test-logs/vm-pi.guest.log
HOSTLOG=$BUILD/test-logs/vm-pi.host.log
: > "$HOSTLOG"
GPID=
cleanup() {
	[ -n "$GPID" ] && kill "$GPID" 2>/dev/null
	rm -rf "$SHARE" "$SHARE".ns*
}
trap cleanup EXIT
# nsid LBS MS nvme-ns properties
NSLIST='1 4096 8 pi=1
2 512 8 pi=2,mset=1
3 4096 16 pi=3,pil=1
4 4096 16 pi=1,pif=2
5 4096 64 pi=2,pif=2
6 4096 8 -
7 512 16 pi=1,mset=1'
SIZE=$((32 << 20))
set --
: > "$SHARE/geometry"
while read -r n lbs ms props; do
	img=$SHARE.ns$n.img
	truncate -s $SIZE "$img"
	p="logical_block_size=$lbs,physical_block_size=$lbs,ms=$ms"
	[ "$props" = - ] || p="$p,$props"
	set -- "$@" -e "$p" -I "$img"
	# QEMU's layout: as many blocks as data and metadata fit
	echo "$n $lbs $ms $((SIZE / (lbs + ms)))" >> "$SHARE/geometry"
done <<EOF
$NSLIST
EOF
cat > "$DIR/cmd.sh" <<'GUEST_EOF'
cp /payload/pi/check.sh /payload/check.sh
export PATH=/payload/pi:$PATH
sh /payload/pi/guest-pi.sh
GUEST_EOF
# host VERB NSID ARGS: change image NSID as the guest asked
host() {
	python3 - "$SHARE" "$@" <<'PY'
import os, sys
share, verb, n = sys.argv[1], sys.argv[2], sys.argv[3]
geo = {l.split()[0]: [int(x) for x in l.split()[1:]] for l in open(share + "/geometry")}
lbs, ms, nlb = geo[n]
fd = os.open("%s.ns%s.img" % (share, n), os.O_RDWR)
moff = nlb * lbs  # the metadata follows the data
if verb == "corrupt":
    off = int(sys.argv[4]) * lbs + 100
    b = os.pread(fd, 1, off)
    os.pwrite(fd, bytes([b[0] ^ 0x20]), off)
elif verb == "misplace":
    a, b = int(sys.argv[4]), int(sys.argv[5])
    os.pwrite(fd, os.pread(fd, lbs, a * lbs), b * lbs)
    os.pwrite(fd, os.pread(fd, ms, moff + a * ms), moff + b * ms)
else:
    sys.exit("unknown request " + verb)
os.close(fd)
print("host: %s ns%s %s done" % (verb, n, " ".join(sys.argv[4:])))
PY
}
: > "$LOG"
# no_timer_check: the IO-APIC timer check panics the guest when TCG runs on
# a loaded host
vm_run "$LOG" -V -U -s "$SHARE" -A no_timer_check "$@" -p "$DIR" -f "$DIR/cmd.sh" > /dev/null 2>&1 &
GPID=$!
# answer the guest's requests, in order, until it ends
k=1
while kill -0 "$GPID" 2>/dev/null; do
	req=$(sed -n "s/^@@HOST $k \(.*\)@@\$/\1/p" "$LOG" | head -n 1)
	if [ -n "$req" ]; then
		# shellcheck disable=SC2086
		host $req >> "$HOSTLOG" 2>&1 || echo "host: request $k ($req) failed" >> "$HOSTLOG"
		touch "$SHARE/ack-$k"
		k=$((k + 1))
		continue
	fi
	sleep 0.2
done
wait "$GPID"
rc=$?
GPID=
cat "$LOG"
echo "---- host side"
cat "$HOSTLOG"
[ $rc = 0 ] || fail "a check failed in the guest (vmrun exit $rc)"
expect "$LOG" "^vmrun: $BDF: bound to vfio-pci" "the controller was not bound to vfio-pci"
grep -q '^NOT OK' "$LOG" && fail "a check failed"
grep -q '^host: .*failed' "$HOSTLOG" && fail "a request of the guest failed on the host"
expect "$LOG" '^checks: [0-9]+ ok, 0 not ok' "not every check ran"
expect "$LOG" '^ok: nvme0n5: fio job ended without error \(0\)' "fio on the 64-bit guard namespace"
expect "$LOG" '^ok: nvme0n4: its read fails with EIO \(reference tag\)' "the misplaced block was not refused"
echo "protection information over VFIO: six formats served under fio verify, one refused, changed and misplaced blocks refused with EIO"
