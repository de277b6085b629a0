#!/bin/bash
# build-rootfs.sh - a Debian 12 root file system for the guest of vmrun.sh
# -r: systemd as PID 1, and what the tests that install the nvmefs package
# there need (tests/vm/t-deb-host.sh).  mmdebstrap builds it from the package
# source apt uses on this machine (its sources file is the mirror argument,
# so no host name is written anywhere); it becomes an ext4 image, booted by
# the kernel and initramfs of build-initramfs.sh, whose modules it gets too.
#
# Usage: build-rootfs.sh [-o OUTDIR]
#   -o OUTDIR  where build-initramfs.sh put the kernel (default:
#              $NVMEFS_VM_DIR, else $BUILD/vm); rootfs.img goes there
# The image is rebuilt only when its key changes: this script, the files of
# tests/vm/rootfs, the package list, the sources file's contents, the
# kernel's version and modules, and promtool.  Output: rootfs.img (raw ext4,
# sparse), rootfs.key.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${NVMEFS_VM_DIR:-${BUILD:-$ROOT/build}/vm}
while [ $# -gt 0 ]; do
	case "$1" in
	-o) OUT=$2; shift 2 ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done
log() { echo "[build-rootfs] $*" >&2; }

SUITE=bookworm
# systemd and what its guest runs: logind and dbus (pam_systemd gives a login
# its own session), fio, node_exporter (reads nvmefs's textfile), procps;
# nvmefs's run-time libraries, so that apt installs the package offline
PACKAGES="systemd systemd-sysv udev kmod dbus libpam-systemd procps fio prometheus-node-exporter
	libc6 libev4 libfuse3-3 libinih1 libjson-c5 libmount1 libncursesw6 libnuma1 libsystemd0
	libtinfo6 liburing2"
SIZE=1536M
SOURCES=
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
	[ -s "$f" ] && { SOURCES=$f; break; }
done
[ -n "$SOURCES" ] || { echo "no apt sources file on this machine" >&2; exit 1; }
KVER=$(cat "$OUT/kver" 2>/dev/null) || { echo "no kernel in $OUT: run build-initramfs.sh first" >&2; exit 1; }
[ -d "$OUT/modcache/lib/modules/$KVER" ] || { echo "no modules in $OUT/modcache" >&2; exit 1; }
PROMTOOL=$(command -v promtool || true)
[ -n "$PROMTOOL" ] || { echo "promtool missing (scripts/deps.sh test installs it)" >&2; exit 1; }

KEY=$( {
	cat "$0" "$HERE"/rootfs/*
	echo "$SUITE $PACKAGES $SIZE"
	cat "$SOURCES"
	echo "$KVER"; cat "$OUT/modules.want"
	sha256sum < "$PROMTOOL"
} | sha256sum | cut -c1-16)
if [ -f "$OUT/rootfs.img" ] && [ "$(cat "$OUT/rootfs.key" 2>/dev/null)" = "$KEY" ]; then
	log "rootfs.img is current ($KEY)"
	exit 0
fi
for t in mmdebstrap mke2fs; do
	command -v $t > /dev/null || { echo "$t missing (scripts/deps.sh vm installs it)" >&2; exit 1; }
done
T0=$(date +%s.%N)
TREE=$OUT/rootfs.tree
rm -rf "$TREE" "$OUT/rootfs.img" "$OUT/rootfs.key"
log "mmdebstrap $SUITE from $SOURCES"
# shellcheck disable=SC2086
mmdebstrap --variant=minbase --include="$(echo $PACKAGES | tr ' ' ',')" \
	--customize-hook='echo nvmefs-guest > "$1/etc/hostname"' \
	"$SUITE" "$TREE" "$SOURCES"
T1=$(date +%s.%N)

# the kernel's modules (loaded by the initramfs already; modprobe and udev
# look here)
mkdir -p "$TREE/lib/modules"
cp -a "$OUT/modcache/lib/modules/$KVER" "$TREE/lib/modules/"
install -m 0755 "$PROMTOOL" "$TREE/usr/local/bin/promtool"
# vmrun.service and vmrun.target: the test command after boot
install -d "$TREE/usr/local/lib/vmrun"
install -m 0755 "$HERE/rootfs/run-cmd" "$TREE/usr/local/lib/vmrun/run-cmd"
install -m 0644 "$HERE/rootfs/vmrun.service" "$HERE/rootfs/vmrun.target" "$TREE/etc/systemd/system/"
cat > "$TREE/etc/fstab" <<FSTAB
/dev/vda / ext4 rw,errors=remount-ro 0 1
share /mnt/share 9p trans=virtio,version=9p2000.L,msize=524288,cache=none,nofail 0 0
FSTAB
mkdir -p "$TREE/mnt/share"
# not a first boot (no systemd-firstboot questions on the console); a fixed
# id is fine for a throw-away guest
echo 6e766d65667367756573740000000001 > "$TREE/etc/machine-id"
# root logs in without a password on the console of vmrun.sh -i
chroot "$TREE" passwd -d root > /dev/null
# nothing that fires on its own clock during a test
for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
	fstrim.timer man-db.timer; do
	ln -sf /dev/null "$TREE/etc/systemd/system/$u"
done
T2=$(date +%s.%N)
log "ext4 image of $(du -sh "$TREE" | cut -f1)"
mke2fs -q -t ext4 -L root -d "$TREE" "$OUT/rootfs.img.tmp" "$SIZE"
mv "$OUT/rootfs.img.tmp" "$OUT/rootfs.img"
rm -rf "$TREE"
echo "$KEY" > "$OUT/rootfs.key"
T3=$(date +%s.%N)
log "rootfs.img ($KEY): mmdebstrap $(echo "$T1 $T0" | awk '{printf "%.0f", $1-$2}') s, \
the rest $(echo "$T3 $T1" | awk '{printf "%.0f", $1-$2}') s"
