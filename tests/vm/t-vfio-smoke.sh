#!/bin/sh
# t-vfio-smoke: the VFIO bus alone (src/engine/vfio.c, no engine) drives
# QEMU's NVMe controller behind the emulated IOMMU: bring-up, Identify, one
# I/O queue pair with an MSI-X vector, pattern write/read-back through PRP
# lists, an interrupt on the eventfd, queue deletion, shutdown, function
# reset.  Twice in one boot: namespace 1 (512 B blocks) and namespace 2
# (4 KiB blocks), which also shows the device can be opened again after close.
. "$(dirname "$0")/lib.sh"
vm_prepare
vm_build_smoke
LOG=$BUILD/test-logs/vm-smoke.guest.log
mkdir -p "$(dirname "$LOG")"
vm_run "$LOG" -V -n 256M -n 64M:4096 -p "$VMBIN/vfio-smoke" -- \
	"vfio-smoke $BDF && vfio-smoke -n 2 -b 8 $BDF" || fail "guest command failed"
expect "$LOG" "^vmrun: $BDF: bound to vfio-pci \(was nvme\), IOMMU group [0-9]+" "vfio-bind did not bind the controller"
expect "$LOG" '^CAP 0x[0-9a-f]{16} ' "no CAP line"
expect "$LOG" 'identify: model "QEMU NVMe Ctrl"' "no Identify output"
expect "$LOG" '^namespace 1: 524288 blocks of 512 bytes' "namespace 1 geometry"
expect "$LOG" '^namespace 2: 16384 blocks of 4096 bytes' "namespace 2 geometry"
[ "$(grep -c 'data OK$' "$LOG")" = 6 ] || fail "expected 6 verified transfers"
[ "$(grep -c 'interrupt on the eventfd' "$LOG")" = 2 ] || fail "expected an interrupt in each run"
[ "$(grep -c '^vfio-smoke: PASS' "$LOG")" = 2 ] || fail "vfio-smoke did not pass twice"
echo "vfio-smoke passed on both namespaces"
