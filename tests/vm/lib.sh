# lib.sh - sourced by tests/vm/t-*.sh.  Each test is self-contained: it
# builds the guest image when missing or stale, builds its programs, boots
# one guest and checks the output.  Exit 0 pass, 77 skip (with the reason on
# the last line), anything else fail.
#
# Environment: ROOT (repository), BUILD (build tree, absolute; the kernel and
# images are cached in $BUILD/vm unless NVMEFS_VM_DIR says otherwise),
# VM_TIMEOUT (seconds per boot, default 300), VM_KERNEL_PKG (the Debian
# kernel package to boot, default what linux-image-amd64 depends on; a test
# that sets it sets NVMEFS_VM_DIR too, so that each kernel has its cache).
set -u

VM_HERE=$(cd "$(dirname "$0")" && pwd)
: "${ROOT:=$(cd "$VM_HERE/../.." && pwd)}"
: "${BUILD:=$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
VMDIR=${NVMEFS_VM_DIR:-$BUILD/vm}
# VM_BACKPORTS=1 (set before sourcing): the kernel of the backports suite
# (build-initramfs.sh -b), in a directory of its own
[ "${VM_BACKPORTS:-0}" = 1 ] && VMDIR=$VMDIR-backports
VMBIN=$BUILD/vm-bin
VM_TIMEOUT=${VM_TIMEOUT:-300}
# QEMU's NVMe controller when it is alone on the root bus (no -G)
BDF=0000:00:01.0
# one guest at a time on this host, whichever build tree it comes from:
# TCG takes every core, and two guests make both time out
VM_LOCK=${TMPDIR:-/tmp}/nvmefs-vm.lock

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# Make sure QEMU, the kernel and the initramfs are there (skip when they
# cannot be had) and current (rebuild when a guest file changed).
vm_prepare() {
	command -v qemu-system-x86_64 >/dev/null ||
		skip "qemu-system-x86_64 missing (scripts/deps.sh vm installs it)"
	for t in busybox cpio depmod modprobe dpkg apt-get gzip xz flock; do
		command -v $t >/dev/null || skip "$t missing (scripts/deps.sh vm installs it)"
	done
	mkdir -p "$VMDIR" "$VMBIN"
	stale=
	if [ ! -f "$VMDIR/initramfs.cpio.gz" ]; then
		stale=1
	else
		for f in "$VM_HERE/build-initramfs.sh" "$VM_HERE/guest/init" "$VM_HERE/guest/nvme-bdfs" \
			"$ROOT/scripts/vfio-bind"; do
			[ "$f" -nt "$VMDIR/initramfs.cpio.gz" ] && stale=1
		done
	fi
	if [ -n "$stale" ]; then
		echo "building the guest image in $VMDIR"
		bpo=
		[ "${VM_BACKPORTS:-0}" = 1 ] && bpo=-b
		if ! flock -w 600 "$VM_LOCK" bash "$VM_HERE/build-initramfs.sh" -o "$VMDIR" $bpo \
			${VM_KERNEL_PKG:+-k "$VM_KERNEL_PKG"} > "$VMDIR/build.log" 2>&1; then
			tail -n 20 "$VMDIR/build.log"
			if [ ! -f "$VMDIR/vmlinuz" ]; then
				skip "no guest kernel: the Debian kernel package could not be downloaded (see $VMDIR/build.log)"
			fi
			fail "building the initramfs failed (see $VMDIR/build.log)"
		fi
	fi
}

# Build a static program for the guest from sources: vm_cc OUT SRC...
vm_cc() {
	out=$1; shift
	gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -pthread \
		-I"$ROOT/src" -I"$ROOT/src/common" -I"$ROOT/src/engine" -DNVMEFS_LOG_NO_JOURNAL \
		-static -o "$VMBIN/$out" "$@" || fail "building $out"
}

# The bus-only smoke program: vfio.c, its holder lookup (excl.c) and the
# logger, nothing else of ours
# (the logger without the journal: no libsystemd in a static guest binary).
vm_build_smoke() {
	vm_cc vfio-smoke "$ROOT/tests/helpers/vfio-smoke.c" "$ROOT/src/engine/vfio.c" "$ROOT/src/common/excl.c" "$ROOT/src/common/log.c"
}

# The same under ASan+UBSan (dynamic: the sanitizer runtimes come along
# into the guest as shared libraries).
vm_build_smoke_san() {
	gcc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
		-fno-omit-frame-pointer -Wall -Wextra -Werror -D_GNU_SOURCE -DNVMEFS_LOG_NO_JOURNAL -pthread \
		-I"$ROOT/src" -I"$ROOT/src/common" -I"$ROOT/src/engine" -o "$VMBIN/vfio-smoke-san" \
		"$ROOT/tests/helpers/vfio-smoke.c" "$ROOT/src/engine/vfio.c" "$ROOT/src/common/excl.c" "$ROOT/src/common/log.c" ||
		fail "building vfio-smoke-san"
}

# Boot once: vm_run LOG VMRUN-OPTIONS... [-- COMMAND].  Fails on IOMMU faults
# (-D) and keeps the guest's output in LOG (printed as well).
vm_run() {
	log=$1; shift
	t0=$(date +%s)
	flock -w 900 "$VM_LOCK" bash "$VM_HERE/vmrun.sh" -d "$VMDIR" -D -t "$VM_TIMEOUT" "$@" > "$log" 2>&1
	rc=$?
	cat "$log"
	echo "(guest run: $(( $(date +%s) - t0 )) s, exit $rc)"
	return $rc
}

# expect LOG REGEX WHAT: the guest output must match
expect() {
	grep -Eq -- "$2" "$1" || fail "$3 (no line matching: $2)"
}
