#!/bin/sh
# t-vfio-fuse: nvmefsd over VFIO on QEMU's NVMe controller, checked through
# its FUSE file in the guest (tests/vm/guest-fuse.sh): dd+cmp buffered and
# O_DIRECT, fio crc32c verify, unaligned writes, I/O at and past the end,
# fsync, punch hole / zero range, SIGTERM with I/O in flight; in the second
# run the controller is detached, read by the kernel's nvme driver while the
# daemon runs, and attached again.  Two daemon
# runs in one boot, polling then interrupts; the second finds the marker the
# first wrote.  Then the controller goes back to the kernel nvme driver,
# which must read the marker the second run wrote.  Host /usr is shared
# (-U) for fio, coreutils, util-linux and python3; a DMA outside the mapped
# IOVAs fails the run (-D).
# under TCG on a loaded host a boot can take minutes: allow 10 minutes
: "${VM_TIMEOUT:=600}"
. "$(dirname "$0")/lib.sh"
vm_prepare
mkdir -p "$BUILD/test-logs"
for b in nvmefsd nvmefsctl; do
	if [ ! -x "$BUILD/$b" ]; then
		make -C "$ROOT" B="$BUILD" "$BUILD/$b" > "$BUILD/test-logs/vm-fuse.make.log" 2>&1 ||
			{ tail -n 20 "$BUILD/test-logs/vm-fuse.make.log"; fail "building $b failed"; }
	fi
done
command -v fio >/dev/null || skip "fio missing on the host (scripts/deps.sh installs it)"
command -v python3 >/dev/null || skip "python3 missing on the host"
DIR=$VMBIN/fuse
rm -rf "$DIR" && mkdir -p "$DIR"
cp "$BUILD/nvmefsd" "$BUILD/nvmefsctl" "$VM_HERE/guest-fuse.sh" "$VM_HERE/guest/check.sh" "$DIR/"
U=$(cat /proc/sys/kernel/random/uuid)
M1=nvmefs-poll-$U
M2=nvmefs-interrupt-$U
GUEST=$DIR/cmd.sh
cat > "$GUEST" <<GUEST_EOF
cp /payload/fuse/check.sh /payload/check.sh
export PATH=/payload/fuse:\$PATH NS_SIZE=$((256 << 20))
QUEUES=1 CPUS=1 sh /payload/fuse/guest-fuse.sh poll - $M1 || exit 1
sh /payload/fuse/guest-fuse.sh interrupt $M1 $M2 || exit 1
. /payload/check.sh
echo "== back to the kernel driver"
t "vfio-bind --unbind gives it back to nvme" ok "bound to nvme \\(was vfio-pci\\)" vfio-bind --unbind $BDF
c "... /dev/nvme0n1 is back" wait_path /dev/nvme0n1
got=\$(dd if=/dev/nvme0n1 bs=512 skip=400000 count=1 iflag=direct 2>/dev/null | head -n 1)
c "the kernel driver reads the marker nvmefs wrote (got '\$got')" [ "\$got" = "$M2" ]
done_checks
GUEST_EOF
LOG=$BUILD/test-logs/vm-fuse.guest.log
# QEMU's drive defaults to discard=ignore, yet its namespace reports (DLFEAT)
# that deallocated blocks read as zeroes: let Deallocate really deallocate.
# poll mode runs one reactor on CPU 1, so that the tools keep CPU 0 of the
# two vCPUs (under TCG a busy poller starves them).
vm_run "$LOG" -V -U -Q -set -Q drive.nvm1.discard=unmap -p "$DIR" -f "$GUEST" || fail "a check failed in the guest"
expect "$LOG" "^vmrun: $BDF: bound to vfio-pci" "the controller was not bound to vfio-pci"
expect "$LOG" 'daemon: .*QEMU NVMe Ctrl' "the daemon did not identify QEMU's controller"
[ "$(grep -c '^== mode .* done$' "$LOG")" = 2 ] || fail "not both daemon runs finished"
[ "$(grep -cE '^checks: [0-9]+ ok, 0 not ok' "$LOG")" = 3 ] || fail "a summary is missing or has failures"
# 16 checks in the first run, 26 in the second (the marker, detach and
# attach), 3 after unbinding
[ "$(grep -c '^ok: ' "$LOG")" = 61 ] || fail "expected 61 checks, got $(grep -c '^ok: ' "$LOG")"
expect "$LOG" "^ok: the kernel driver reads the first run's marker" "detach did not give the device to the kernel driver"
expect "$LOG" "^ok: cmp O_DIRECT after attach" "attach after detach did not serve the data"
[ "$(grep -c '^ok: fio randrw' "$LOG")" = 2 ] || fail "fio did not verify in both modes"
expect "$LOG" "^ok: the kernel driver reads the marker" "the kernel driver did not see nvmefs's data"
grep -q '^NOT OK' "$LOG" && fail "a check failed"
echo "nvmefsd over VFIO passed the FUSE checks in poll and interrupt mode; data seen by the kernel driver"
