#!/bin/sh
# t-vfio-perf: the whole engine over VFIO.  nvmefs-perf drives QEMU's NVMe
# controller (bound to vfio-pci, behind the emulated IOMMU) with random mixed
# reads and writes from two reactors, checking every read against what was
# written (--verify), once with interrupts (MSI-X eventfds) and once polling.
# A DMA outside the mapped IOVAs fails the run (-D) even if the data matched.
. "$(dirname "$0")/lib.sh"
vm_prepare
PERF=$BUILD/nvmefs-perf
mkdir -p "$BUILD/test-logs"
if [ ! -x "$PERF" ] || [ -n "$(find "$ROOT/src" -name '*.[ch]' -newer "$PERF" 2>/dev/null | head -1)" ]; then
	make -C "$ROOT" B="$BUILD" "$PERF" > "$BUILD/test-logs/vm-perf.make.log" 2>&1 ||
		{ tail -n 20 "$BUILD/test-logs/vm-perf.make.log"; fail "building nvmefs-perf failed"; }
fi
DIR=$VMBIN/perf
rm -rf "$DIR" && mkdir -p "$DIR"
cp "$PERF" "$DIR/"
for mode in interrupt poll; do
	cat > "$DIR/$mode.conf" <<CONF_EOF
[daemon]
file_owner = root
file_group = root
[engine]
queues = 2
queue_depth = 64
cq_budget = 16
mode = $mode
[controller nvme0]
device = $BDF
CONF_EOF
done
LOG=$BUILD/test-logs/vm-perf.guest.log
# the guest's console is a terminal: nvmefs-perf's stderr goes to a file, or
# its progress line would share the report's lines
vm_run "$LOG" -V -p "$DIR" -- \
	"cd /payload/perf && for m in interrupt poll; do echo \"== mode \$m\"; ./nvmefs-perf -c \$m.conf -w randrw -t 3 --verify 2> /perf.err; rc=\$?; cat /perf.err; [ \$rc = 0 ] || exit \$rc; done" ||
	fail "nvmefs-perf failed in the guest"
expect "$LOG" 'QEMU NVMe Ctrl' "the engine did not identify the controller"
for mode in interrupt poll; do
	expect "$LOG" "^nvmefs-perf: randrw .*reactors=2 mode=$mode .*verify" "no $mode run"
done
[ "$(grep -cE '^verify: [1-9][0-9]* reads checked, 0 mismatches' "$LOG")" = 2 ] ||
	fail "expected two verified runs with reads and no mismatches"
awk '$1 == "total" { if ($(NF-1) != 0 || $NF != 0) bad = 1; n++ } END { exit !(n == 2 && !bad) }' "$LOG" ||
	fail "I/O errors or bogus completions reported"
echo "nvmefs-perf verified randrw over VFIO in interrupt and poll mode"
