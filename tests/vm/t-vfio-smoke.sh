#!/bin/sh
# t-vfio-smoke: the VFIO bus alone (src/engine/vfio.c, no engine) drives
# QEMU's NVMe controller behind the emulated IOMMU: bring-up, Identify, one
# I/O queue pair with an MSI-X vector, pattern write/read-back through PRP
# lists, an interrupt on the eventfd, queue deletion, shutdown, function
# reset.  Twice in one boot: namespace 1 (512 B blocks) and namespace 2
# (4 KiB blocks), which also shows the device can be opened again after close;
# then again built with ASan+UBSan (leak checking on), with a refusal too, so
# that the error paths' clean-up is checked as well.
. "$(dirname "$0")/lib.sh"
vm_prepare
vm_build_smoke
vm_build_smoke_san
LOG=$BUILD/test-logs/vm-smoke.guest.log
mkdir -p "$(dirname "$LOG")"
vm_run "$LOG" -V -n 256M -n 64M:4096 -p "$VMBIN/vfio-smoke" -p "$VMBIN/vfio-smoke-san" -- \
	"vfio-smoke $BDF && vfio-smoke -n 2 -b 8 $BDF &&
	 export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 &&
	 vfio-smoke-san -n 2 $BDF && { vfio-smoke-san -o 0000:07:00.0; [ \$? = 1 ]; } && echo sanitized-ok" ||
	fail "guest command failed"
expect "$LOG" "^vmrun: $BDF: bound to vfio-pci \(was nvme\), IOMMU group [0-9]+" "vfio-bind did not bind the controller"
expect "$LOG" '^CAP 0x[0-9a-f]{16} ' "no CAP line"
expect "$LOG" 'identify: model "QEMU NVMe Ctrl"' "no Identify output"
expect "$LOG" '^namespace 1: 524288 blocks of 512 bytes' "namespace 1 geometry"
expect "$LOG" '^namespace 2: 16384 blocks of 4096 bytes' "namespace 2 geometry"
[ "$(grep -c 'data OK$' "$LOG")" = 9 ] || fail "expected 9 verified transfers"
[ "$(grep -c 'interrupt on the eventfd' "$LOG")" = 3 ] || fail "expected an interrupt in each run"
[ "$(grep -c '^vfio-smoke: PASS' "$LOG")" = 3 ] || fail "vfio-smoke did not pass three times"
expect "$LOG" '^sanitized-ok$' "the sanitized run did not finish"
grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' "$LOG" && fail "sanitizer report"
echo "vfio-smoke passed on both namespaces, and under ASan+UBSan"
