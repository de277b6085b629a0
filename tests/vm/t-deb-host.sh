#!/bin/sh
# t-deb-host: the Debian package on a Debian 12 storage host run by systemd
# 252 as PID 1, over QEMU's NVMe controller behind the emulated IOMMU.
# The host builds the package twice from this tree (make deb's
# scripts/mkdeb, lintian clean; then the same tree as a later version, for
# the upgrade) and the guest's root file system (build-rootfs.sh: mmdebstrap
# from the package source apt uses here, cached in $VMDIR by a key of its
# inputs), boots it (vmrun.sh -r) and runs tests/vm/guest-deb-host.sh in it,
# which installs the package with apt and checks what systemd does with it,
# then reboots once (-B 1).  See guest-deb-host.sh for the checks.  Each
# stage's time is printed ("measure:" lines).
# The guest boots Debian 12's backports kernel (6.12; build-initramfs.sh -b):
# its own 6.1 speaks FUSE 7.38, which cannot resend what a killed daemon had
# taken, so nvmefsd refuses to adopt the mount after a crash and to restart
# in place there (docs/operations.md, section 6).
# timeout: 1800
: "${VM_TIMEOUT:=1500}"
VM_BACKPORTS=1
. "$(dirname "$0")/lib.sh"
vm_prepare
for t in mmdebstrap mke2fs qemu-img dpkg-buildpackage dh lintian promtool; do
	command -v $t > /dev/null || skip "$t missing (scripts/deps.sh vm installs it)"
done
mkdir -p "$BUILD/test-logs"
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - $1)); }

# the root file system: built when its key changed, one build at a time
t=$(date +%s)
flock -w 1200 "$VMDIR/rootfs.lock" bash "$VM_HERE/build-rootfs.sh" -o "$VMDIR" \
	> "$BUILD/test-logs/vm-deb-host.rootfs.log" 2>&1 ||
	{ tail -n 30 "$BUILD/test-logs/vm-deb-host.rootfs.log"; fail "building the root file system failed"; }
grep '^\[build-rootfs\]' "$BUILD/test-logs/vm-deb-host.rootfs.log"
echo "measure: root file system: $(elapsed $t) s"

# the package, and the same tree as the next version
DEB=$BUILD/deb
t=$(date +%s)
sh "$ROOT/scripts/mkdeb" "$DEB" > "$BUILD/test-logs/vm-deb-host.deb.log" 2>&1 ||
	{ tail -n 30 "$BUILD/test-logs/vm-deb-host.deb.log"; fail "make deb failed"; }
cat "$BUILD/test-logs/vm-deb-host.deb.log"
V=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
NEXT=$V+next1
echo "measure: make deb (with lintian): $(elapsed $t) s"
t=$(date +%s)
sh "$ROOT/scripts/mkdeb" -n -L -v "$NEXT" "$DEB" > "$BUILD/test-logs/vm-deb-host.next.log" 2>&1 ||
	{ tail -n 30 "$BUILD/test-logs/vm-deb-host.next.log"; fail "building $NEXT failed"; }
echo "measure: the same tree as $NEXT, on the first build's objects: $(elapsed $t) s"
grep -E '^(cc|gcc) .* -c ' "$DEB/build.log" | sed 's/.* -o \([^ ]*\) .*/recompiled: \1/'

SHARE=$(mktemp -d /tmp/nvmefs-deb-host.XXXXXX)
trap 'rm -rf "$SHARE"' EXIT
# the guest's unprivileged user runs a script from here
chmod 755 "$SHARE"
cp "$DEB/nvmefs_${V}_amd64.deb" "$DEB/nvmefs_${NEXT}_amd64.deb" "$VM_HERE/guest-deb-host.sh" \
	"$VM_HERE/guest-deb-fio.sh" "$ROOT/scripts/vfio-bind" "$SHARE/"
cat > "$SHARE/env" <<EOF
V=$V
NEXT=$NEXT
BDF=$BDF
NS_BYTES=$((256 << 20))
EOF
echo 'exec bash /mnt/share/guest-deb-host.sh' > "$SHARE/cmd"
LOG=$BUILD/test-logs/vm-deb-host.guest.log
t=$(date +%s)
vm_run "$LOG" -r "$VMDIR/rootfs.img" -B 1 -m 2G -s "$SHARE" -n 256M -l "$BUILD/test-logs/vm-deb-host.console.log" \
	-f "$SHARE/cmd" || {
	cp "$SHARE"/journal-boot*.txt "$BUILD/test-logs/" 2> /dev/null
	fail "a check failed in the guest (the whole console: test-logs/vm-deb-host.console.log)"
}
echo "measure: the guest, both boots: $(elapsed $t) s"
cp "$SHARE"/journal-boot*.txt "$BUILD/test-logs/" 2> /dev/null
# the guest's uptime at each step, as durations (a step's uptime below the
# last one's: the reboot came between)
awk '/^== .* \(at [0-9.]+s\)$/ {
	at = $NF; gsub(/[(at)s]/, "", at)
	if (name != "" && at + 0 >= last + 0) printf "measure: step %s: %.0f s\n", name, at - last
	name = $0; sub(/^== /, "", name); sub(/ \(at [0-9.]+s\)$/, "", name); last = at
}' "$LOG"
[ "$(grep -c '^vmrun: the guest reboots$' "$LOG")" = 1 ] || fail "the guest did not reboot once"
[ "$(grep -cE '^checks: [0-9]+ ok, 0 not ok$' "$LOG")" = 2 ] || fail "a boot's summary is missing or has failures"
grep -q '^NOT OK' "$LOG" && fail "a check failed"
expect "$LOG" "^ok: kill 2: systemd restarts the daemon" "the second kill was not restarted"
expect "$LOG" "^ok: fio: every round on both files verified, 0 errors" "fio did not verify"
expect "$LOG" "^ok: \.\.\. the kernel driver reads nvmefs's marker" "the kernel driver did not read nvmefs's data"
echo "measure: t-deb-host: $(elapsed "$T0") s in all"
echo "the package installed, served, survived two kills, a reload and an upgrade under fio, a hung stop and a reboot"
