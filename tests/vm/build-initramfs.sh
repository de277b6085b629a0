#!/bin/bash
# build-initramfs.sh - fetch a Debian guest kernel (without installing it on
# this host) and build a small busybox initramfs in which the VFIO path of
# nvmefs is tested inside QEMU.  See README.md in this folder.
#
# Usage: build-initramfs.sh [-o OUTDIR] [-k KERNEL_PKG] [-b] [--install-deps] [--force] [--keep]
#   -o OUTDIR       where the kernel and initramfs go (default: $NVMEFS_VM_DIR,
#                   else $BUILD/vm, else build/vm under the repository)
#   -k KERNEL_PKG   Debian package, e.g. linux-image-6.1.0-57-amd64
#                   (default: whatever linux-image-amd64 depends on)
#   -b              from the backports suite of the package source apt uses
#                   here (e.g. bookworm-backports: Linux 6.12 on Debian 12,
#                   whose own 6.1 speaks FUSE 7.38, which cannot resend what a
#                   dead daemon had taken); its package lists are kept in
#                   OUTDIR/apt, apart from the host's
#   --install-deps  apt-get install the host packages this needs first
#   --force         re-download and re-extract the kernel even if cached
#   --keep          keep the downloaded .deb and the full extracted tree
# Output in OUTDIR: vmlinuz, vmlinux (uncompressed, PVH boot), initramfs.cpio.gz,
#   kver, config, modules.order, modcache/ (the guest's modules)
# Set VMRUN_NO_PVH=1 to skip the vmlinux extraction (saves ~65 MB of disk).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${NVMEFS_VM_DIR:-${BUILD:-$ROOT/build}/vm}
PKG=
INSTALL=0
BACKPORTS=0
FORCE=0
KEEP=0

while [ $# -gt 0 ]; do
	case "$1" in
	-o) OUT=$2; shift 2 ;;
	-k) PKG=$2; shift 2 ;;
	-b) BACKPORTS=1; shift ;;
	--install-deps) INSTALL=1; shift ;;
	--force) FORCE=1; shift ;;
	--keep) KEEP=1; shift ;;
	-h|--help) sed -n '2,23p' "$0"; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done

log() { echo "[build-initramfs] $*" >&2; }

HOST_PKGS="qemu-system-x86 busybox-static cpio kmod xz-utils"
if [ "$INSTALL" = 1 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq $HOST_PKGS >/dev/null
fi
for t in busybox cpio depmod modprobe dpkg apt-get gzip xz; do
	command -v "$t" >/dev/null || { echo "missing tool: $t (apt-get install -y $HOST_PKGS)" >&2; exit 1; }
done
if [ ! -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
	echo "/bin/busybox missing or not static: apt-get install -y busybox-static" >&2; exit 1
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s.%N)

# Modules: resolve dependencies against the extracted tree, keep a private
# copy of just what the guest needs (so the 400 MB tree can be dropped).
# msdos + nls_cp437: a small file system to mount on a namespace, so that
# vfio-bind's "mounted" refusal can be tested.  virtio_blk + ext4: the root
# file system of the Debian guest (build-rootfs.sh, vmrun.sh -r).  configfs,
# nvmet, nvmet-tcp, nvme-fabrics and nvme-tcp: a namespace file served over
# NVMe/TCP by the kernel's target and connected to by its initiator
# (t-export-nvmet.sh).
MODS="nvme nvme-core vfio vfio_iommu_type1 vfio-pci vfio-pci-core irqbypass fuse \
      virtio_pci 9pnet_virtio 9p msdos nls_cp437 virtio_blk ext4 configfs nvmet nvmet-tcp \
      nvme-fabrics nvme-tcp"
MODCACHE=$OUT/modcache

# ---------------------------------------------------------------- kernel
APT=()
if [ "$BACKPORTS" = 1 ]; then
	# the host's first deb822 stanza (or sources.list line) with its suite
	# made SUITE-backports: the same mirror, no host name written here
	A=$OUT/apt
	mkdir -p "$A/sources" "$A/lists/partial" "$A/cache/archives/partial"
	if [ -s /etc/apt/sources.list.d/debian.sources ]; then
		awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1' /etc/apt/sources.list.d/debian.sources |
			awk '/^Suites:/ { print "Suites: " $2 "-backports"; next } { print }' > "$A/sources/bpo.sources"
	else
		awk '$1 == "deb" { $3 = $3 "-backports"; print; exit }' /etc/apt/sources.list > "$A/sources/bpo.list"
	fi
	APT=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$A/sources"
		-o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache")
	if [ -z "$PKG" ]; then
		apt-get "${APT[@]}" -qq update 2>&1 | grep -v unsandboxed >&2 || true
		PKG=$(apt-cache "${APT[@]}" depends linux-image-amd64 2>/dev/null |
			awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	fi
fi
if [ -z "$PKG" ]; then
	PKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	# offline, or the package lists gone: keep what is cached
	[ -n "$PKG" ] || PKG=$(cat "$OUT/kernel.pkg" 2>/dev/null || true)
	[ -n "$PKG" ] || { echo "cannot resolve linux-image-amd64 (run apt-get update)" >&2; exit 1; }
fi
KROOT=$OUT/kroot
# a changed module list needs the full tree again, hence a fresh download
if [ "$FORCE" = 1 ] || [ ! -f "$OUT/kernel.pkg" ] || [ "$(cat "$OUT/kernel.pkg")" != "$PKG" ] ||
	[ ! -f "$OUT/vmlinuz" ] || [ "$(cat "$OUT/modules.want" 2>/dev/null)" != "$(echo $MODS)" ]; then
	log "downloading $PKG"
	rm -rf "$OUT/deb" "$KROOT"
	mkdir -p "$OUT/deb" "$KROOT"
	(cd "$OUT/deb" && apt-get "${APT[@]}" download "$PKG" 2>&1 | grep -v 'unsandboxed' >&2 || true)
	DEB=$(ls "$OUT"/deb/"$PKG"_*.deb)
	log "extracting $(basename "$DEB")"
	dpkg -x "$DEB" "$KROOT"
	KVER=$(ls "$KROOT/lib/modules" | head -1)
	depmod -b "$KROOT" "$KVER"
	cp "$KROOT/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
	rm -f "$OUT/vmlinux"
	cp "$KROOT/boot/config-$KVER" "$OUT/config"
	echo "$KVER" > "$OUT/kver"
	echo "$PKG" > "$OUT/kernel.pkg"
	rm -rf "$OUT/modcache"
	fresh=1
else
	KVER=$(cat "$OUT/kver")
	fresh=0
fi

# The uncompressed ELF kernel boots through QEMU's PVH entry point: no
# firmware boot loader and no in-guest decompression, which under TCG saves
# about 3 s per boot.  vmrun.sh uses vmlinux when present, else vmlinuz.
extract_vmlinux() {
	local magic off
	for magic in '\xfd\x37\x7a\x58\x5a\x00:xz -dc' '\x28\xb5\x2f\xfd:zstd -dc' '\x1f\x8b\x08:gzip -dc'; do
		for off in $(LC_ALL=C grep -obUaP "${magic%%:*}" "$OUT/vmlinuz" | cut -d: -f1 | head -3); do
			tail -c +$((off + 1)) "$OUT/vmlinuz" | ${magic#*:} > "$OUT/vmlinux.tmp" 2>/dev/null
			if [ "$(head -c 4 "$OUT/vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
				mv "$OUT/vmlinux.tmp" "$OUT/vmlinux"
				return 0
			fi
		done
	done
	rm -f "$OUT/vmlinux.tmp"
	return 1
}
if [ ! -f "$OUT/vmlinux" ] && [ "${VMRUN_NO_PVH:-0}" != 1 ]; then
	if extract_vmlinux && readelf -n "$OUT/vmlinux" 2>/dev/null | grep -q 'Xen.*0x00000012'; then
		log "extracted vmlinux (PVH entry point) for faster boots"
	else
		rm -f "$OUT/vmlinux"
		log "no PVH-capable vmlinux; vmrun.sh will boot vmlinuz"
	fi
fi

if [ ! -d "$MODCACHE/lib/modules/$KVER" ]; then
	[ -d "$KROOT/lib/modules/$KVER" ] || { echo "kernel tree gone; rerun with --force" >&2; exit 1; }
	rm -rf "$MODCACHE"
	: > "$OUT/modules.order"
	for m in $MODS; do
		if grep -qE "/$(echo "$m" | sed 's/[-_]/[-_]/g')\.ko" "$KROOT/lib/modules/$KVER/modules.builtin"; then
			log "$m is built in"
			continue
		fi
		modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" |
			awk '$1=="insmod"{print $2}' >> "$OUT/modules.order"
	done
	# de-duplicate, keep first occurrence (dependency order)
	awk '!seen[$0]++' "$OUT/modules.order" > "$OUT/modules.order.tmp"
	while read -r f; do
		rel=${f#"$KROOT"/}
		mkdir -p "$MODCACHE/$(dirname "$rel")"
		cp "$f" "$MODCACHE/$rel"
		echo "/$rel"
	done < "$OUT/modules.order.tmp" > "$OUT/modules.order"
	rm -f "$OUT/modules.order.tmp"
	cp "$KROOT/lib/modules/$KVER"/modules.builtin* "$KROOT/lib/modules/$KVER/modules.order" \
		"$MODCACHE/lib/modules/$KVER/"
	depmod -b "$MODCACHE" "$KVER"
	echo $MODS > "$OUT/modules.want"
fi
if [ "$KEEP" = 0 ] && [ "$fresh" = 1 ]; then
	rm -rf "$KROOT" "$OUT/deb"
fi

# ---------------------------------------------------------------- rootfs
ST=$OUT/stage
rm -rf "$ST"
mkdir -p "$ST"/{bin,sbin,etc/vmrun,proc,sys,dev,tmp,run,mnt/share,payload,vmrun,root,lib} \
	"$ST"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64}
cp /bin/busybox "$ST/bin/busybox"
# dynamic binaries (payload or host /usr shared over 9p) find their loader and
# libraries through these links, whatever the host's /usr layout is.
ln -s ../usr/lib/x86_64-linux-gnu "$ST/lib/x86_64-linux-gnu"
ln -s usr/lib64 "$ST/lib64"
cp -a "$MODCACHE/lib/modules" "$ST/lib/"
cp "$OUT/modules.order" "$ST/etc/vmrun/modules.order"
echo "$KVER" > "$ST/etc/vmrun/kver"
echo "root:x:0:0:root:/root:/bin/sh" > "$ST/etc/passwd"
echo "root:x:0:" > "$ST/etc/group"
cp "$HERE/guest/init" "$ST/init"
cp "$HERE/guest/nvme-bdfs" "$ROOT/scripts/vfio-bind" "$ST/bin/"
chmod 755 "$ST/init" "$ST/bin/nvme-bdfs" "$ST/bin/vfio-bind"

(cd "$ST" && find . -print0 | sort -z | cpio --null -o -H newc -R 0:0 --quiet) |
	gzip -1 > "$OUT/initramfs.cpio.gz"
rm -rf "$ST"
T1=$(date +%s.%N)
log "kernel $KVER ($PKG)"
log "$OUT/initramfs.cpio.gz: $(du -h "$OUT/initramfs.cpio.gz" | cut -f1), $(wc -l < "$OUT/modules.order") modules"
log "done in $(echo "$T1 $T0" | awk '{printf "%.1f", $1-$2}') s"
