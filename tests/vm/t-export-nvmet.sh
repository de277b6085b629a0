#!/bin/sh
# t-export-nvmet: a namespace file of nvmefsd served over NVMe/TCP by the
# kernel's target (nvmet) and used by the kernel's initiator in the same
# guest (tests/vm/guest-export-nvmet.sh): export and refusals
# (scripts/nvmefs-export), access by host NQN and DH-HMAC-CHAP, size and
# block size, data both ways, a Flush and FUA from the initiator reaching
# the software controller, and fio crc32c verify across a kill -9 of
# nvmefsd (under the fd store stand-in): the initiator keeps its device,
# fio ends with error 0 and every byte verified; its longest completion (the
# pause) is printed.
# The guest boots Debian's 6.12 kernel (linux-image-6.12.*+deb12-amd64, from
# bookworm's security updates) rather than 6.1: adopting the FUSE connection
# after a kill -9 needs FUSE_NOTIFY_RESEND (Linux 6.9), and the target's
# DH-HMAC-CHAP (CONFIG_NVME_TARGET_AUTH) is not built in Debian's 6.1.  No
# vIOMMU (-M none): nothing here uses VFIO, and 6.12 under TCG has been seen
# to panic at boot checking the timer through the emulated interrupt
# remapping.  nvme-cli, fio and coreutils come from the host's /usr.
: "${VM_TIMEOUT:=420}"
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
: "${BUILD:=$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
if [ -z "${VM_KERNEL_PKG:-}" ]; then
	VM_KERNEL_PKG=$(apt-cache pkgnames linux-image-6.12 2>/dev/null |
		grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | sort -V | tail -n 1)
	[ -n "$VM_KERNEL_PKG" ] || VM_KERNEL_PKG=$(cat "$BUILD/vm-6.12/kernel.pkg" 2>/dev/null)
fi
[ -n "$VM_KERNEL_PKG" ] || { echo "SKIP: no linux-image-6.12.*+deb12-amd64 package known to apt (apt-get update?)"; exit 77; }
export VM_KERNEL_PKG NVMEFS_VM_DIR=${NVMEFS_VM_DIR:-$BUILD/vm-6.12}
. "$(dirname "$0")/lib.sh"
vm_prepare
for t in nvme fio python3; do
	command -v $t >/dev/null || skip "$t missing on the host (scripts/deps.sh vm installs it)"
done
for b in nvmefsd nvmefsctl tools/fdstore; do
	[ -x "$BUILD/$b" ] || make -C "$ROOT" B="$BUILD" "$BUILD/$b" > /dev/null 2>&1 || fail "building $b failed"
done
DIR=$VMBIN/export
rm -rf "$DIR" && mkdir -p "$DIR"
cp "$BUILD/nvmefsd" "$BUILD/nvmefsctl" "$BUILD/tools/fdstore" "$ROOT/scripts/nvmefs-export" \
	"$VM_HERE/guest-export-nvmet.sh" "$VM_HERE/guest/check.sh" "$DIR/"
SHARE=$(mktemp -d /tmp/nvmefs-nvmet.XXXXXX)
trap 'rm -rf "$SHARE"' EXIT
cat > "$DIR/cmd.sh" <<'GUEST_EOF'
cp /payload/export/check.sh /payload/check.sh
sh /payload/export/guest-export-nvmet.sh
GUEST_EOF
LOG=$BUILD/test-logs/vm-export-nvmet.guest.log
mkdir -p "$BUILD/test-logs"
vm_run "$LOG" -M none -U -s "$SHARE" -p "$DIR" -f "$DIR/cmd.sh" || fail "a check failed in the guest"
expect "$LOG" "^checks: [0-9]+ ok, 0 not ok" "the guest's checks did not all pass"
grep -q '^NOT OK' "$LOG" && fail "a check failed"
[ "$(grep -c '^ok: ' "$LOG")" = 26 ] || fail "expected 26 checks, got $(grep -c '^ok: ' "$LOG")"
expect "$LOG" "^killed nvmefsd" "nvmefsd was not killed under fio"
# fio: error 0, all 32 MiB written and verified; the longest completion is
# the pause the kill made (under TCG, with emulation stalls on top)
python3 - "$SHARE/fio.json" <<'PY' || fail "fio across the kill"
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
w, r = j["write"], j["read"]
print("fio through NVMe/TCP across the kill: error %d, wrote %d MiB, verified %d MiB; "
      "longest completion: write %.1f ms, read %.1f ms; write p99 %.1f ms"
      % (j["error"], w["io_bytes"] >> 20, r["io_bytes"] >> 20, w["clat_ns"]["max"] / 1e6,
         r["clat_ns"]["max"] / 1e6, w["clat_ns"]["percentile"]["99.000000"] / 1e6))
sys.exit(j["error"] != 0 or w["io_bytes"] != 32 << 20 or r["io_bytes"] != 32 << 20)
PY
echo "PASS: nvmet served the namespace file over NVMe/TCP; flushes and FUA reached the device; fio verified across a kill -9"
exit 0
