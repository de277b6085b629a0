#!/bin/sh
# deps.sh - install, idempotently, every Debian package nvmefs needs to build,
# run and test.  apt-get update runs once, and only when something is missing.
#
# Usage: scripts/deps.sh [run|build|deb|test|vm|bench|all]   (default: all)
#   run (= build): what building and running the daemon needs, no more
#   (make run); deb: and building the Debian package (make deb); the test,
#   VM and benchmark tools come with make check
set -eu

BUILD="gcc make pkg-config libc6-dev libfuse3-dev liburing-dev fuse3 libev-dev libnuma-dev \
	libinih-dev libjson-c-dev libsystemd-dev libmount-dev libncurses-dev check"
# clang and its sanitizer runtimes: the ThreadSanitizer and libFuzzer builds
# strace: NVMEFS_STRACE_DIR (scripts/strace-exec); libseccomp2: scripts/seccomp-exec;
# qemu-utils: qemu-io for the recipes of docs/operations.md (t-recipes);
# qemu-system-common (qemu-storage-daemon), nbdkit, libnbd-bin (nbdcopy,
# nbdinfo) and openssl (test certificates): the NBD exports (t-export-nbd)
TEST="clang libclang-rt-14-dev e2fsprogs fio rsync qemu-utils util-linux coreutils procps psmisc xxd python3 systemd man-db groff-base bsdextrautils strace libseccomp2 qemu-system-common nbdkit libnbd-bin openssl"
# nvme-cli: the NVMe/TCP initiator in the guest, from the host's /usr (t-export-nvmet);
# the Debian package and the guest that installs it (tests/vm/t-deb-host.sh:
# a Debian root file system made by mmdebstrap, an ext4 image of it, a qcow2
# overlay per run)
DEB="debhelper dpkg-dev fakeroot lintian"
VM="qemu-system-x86 busybox-static cpio kmod xz-utils binutils nvme-cli mmdebstrap e2fsprogs qemu-utils $DEB"
BENCH="qemu-system-common nbdkit libnbd-bin valgrind gnuplot-nox"

case "${1:-all}" in
run | build) PKGS="$BUILD" ;;
deb) PKGS="$BUILD $DEB" ;;
test) PKGS="$BUILD $TEST" ;;
vm) PKGS="$BUILD $TEST $VM" ;;
bench) PKGS="$BUILD $TEST $BENCH" ;;
all) PKGS="$BUILD $TEST $VM $BENCH" ;;
*) echo "usage: $0 [run|build|deb|test|vm|bench|all]" >&2; exit 2 ;;
esac

missing=
for p in $PKGS; do
	s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$s" in *" installed") ;; *) missing="$missing $p" ;; esac
done
# promtool lints the metrics in the tests: taken out of Debian's prometheus
# package rather than installing it, which would start a Prometheus server
want_promtool=no
case "${1:-all}" in run | build | deb) ;; *) command -v promtool >/dev/null || want_promtool=yes ;; esac
[ -z "$missing" ] && [ $want_promtool = no ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing:$missing$([ $want_promtool = yes ] && echo " promtool") (run as root to install them)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ -n "$missing" ]; then
	echo "deps.sh: installing$missing" >&2
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if [ $want_promtool = yes ]; then
	echo "deps.sh: installing promtool (from the prometheus package, into /usr/local/bin)" >&2
	d=$(mktemp -d)
	chmod 755 "$d" # apt-get download fetches as the _apt user
	(cd "$d" && apt-get download -qq prometheus >/dev/null &&
		dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x -C "$d" ./usr/bin/promtool) &&
		install -m 0755 "$d/usr/bin/promtool" /usr/local/bin/promtool
	rc=$?
	rm -rf "$d"
	[ $rc = 0 ] || { echo "deps.sh: promtool could not be installed" >&2; exit 1; }
fi
