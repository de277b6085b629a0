#!/bin/bash
# vmrun.sh - boot the test guest (see build-initramfs.sh) in QEMU with an
# emulated NVMe controller behind an emulated Intel IOMMU, run one command in
# it, print its output and exit with its status.  See README.md.
#
# Usage: vmrun.sh [options] [--] COMMAND...
#   COMMAND is joined with spaces and run by the guest's busybox sh (like ssh).
#   Its working directory is /mnt/share when -s is given, else /payload.
# Options:
#   -d DIR        output of build-initramfs.sh (default: $NVMEFS_VM_DIR, else
#                 $BUILD/vm, else build/vm under the repository)
#   -p PATH       copy a host file or folder into the guest at /payload/NAME
#                 (repeatable); shared libraries of ELF executables come along
#   -s DIR        share a host folder read-write over virtio-9p at /mnt/share
#   -U            share the host's /usr read-only over 9p at the guest's /usr,
#                 so host tools (fio, nvme-cli, gdb, strace ...) run in the guest
#   -V            bind every NVMe controller to vfio-pci (scripts/vfio-bind)
#                 before COMMAND runs
#   -f FILE       run this host shell script instead of COMMAND
#   -n SIZE[:LBS] add a namespace of SIZE (e.g. 64M, 1G; sparse file in a temp
#                 dir) with LBS-byte blocks (default 512); repeatable, default
#                 one namespace of 256M
#   -I FILE       use FILE (raw) as the next namespace instead of a temp file
#   -e PROPS      more nvme-ns properties for the namespace the next -n or -I
#                 adds (e.g. ms=16,pi=1,pil=1,pif=2,mset=1)
#   -N OPTS       extra properties for -device nvme (e.g. mdts=5,max_ioqpairs=4)
#   -R            put the controller (id nvme0) behind a hot-pluggable PCIe
#                 root port (id rp1): it is then 0000:01:00.0, and QMP
#                 device_del nvme0 removes it the way a hot unplug does
#   -q SOCKET     QMP on this UNIX socket (server, no wait; qmp.py talks to it;
#                 the namespaces' drives are nvm1, nvm2, ...)
#   -G            put the controller behind a conventional PCI bridge together
#                 with a second controller (serial feedface, 64M namespace):
#                 both land in one IOMMU group (for the group refusals)
#   -m MEM        guest RAM (default 1G)
#   -c CPUS       guest vCPUs (default 2)
#   -t SECS       timeout for the whole run (default 900)
#   -a ACCEL      auto | kvm | tcg (default auto: kvm only with kvm_intel/kvm_amd)
#   -M IOMMU      intel (default) | none (no vIOMMU; vfio-pci then cannot bind
#                 on Debian's kernel, which lacks VFIO_NOIOMMU)
#   -l FILE       keep the whole serial console log here
#   -A 'ARGS'     extra kernel command line
#   -Q ARG        extra QEMU argument (repeatable)
#   -i            interactive: no command, a shell on the console
#   -v            stream the whole console (kernel log included), not just COMMAND's output
#   -D            fail (exit 126) when the console shows an IOMMU (DMAR) fault,
#                 even if COMMAND succeeded; without -D such faults only warn
#   -r IMAGE      boot the Debian root file system IMAGE (build-rootfs.sh) with
#                 systemd as PID 1, on a throw-away qcow2 overlay (IMAGE is not
#                 changed); COMMAND runs once the system is up (vmrun.service),
#                 with the share (-s) mounted by systemd at /mnt/share; not
#                 with -U, -p or -V
#   -B N          with -r: let the guest reboot N times (the command asks by
#                 creating /run/vmrun/reboot); each reboot restarts QEMU on
#                 the same disks, as a power cycle would
# Environment: NVMEFS_VM_DIR (default for -d), VMRUN_DEBUG=1 prints the QEMU
#   command line, TMPDIR (where the per-run temp dir and namespace images go).
# Exit status: COMMAND's status; 124 on timeout; 125 when the guest died
# without reporting one (panic, QEMU error); 126 with -D on a DMA fault.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${NVMEFS_VM_DIR:-${BUILD:-$HERE/../../build}/vm}
PAYLOADS=()
SHARE=
HOSTUSR=0
VFIO=0
CMDFILE=
NS=()
NVME_OPTS=
ROOTPORT=0
QMP=
MEM=1G
CPUS=2
TIMEOUT=900
ACCEL=auto
IOMMU=intel
LOG=
APPEND=
QARGS=()
INTERACTIVE=0
VERBOSE=0
FAILDMA=0
GROUP2=0

ROOTIMG=
REBOOTS=0

usage() { sed -n '2,59p' "$0"; exit "${1:-0}"; }
NSPROPS=()
NEXTPROPS=
while getopts "d:p:s:UVf:n:I:e:N:Rq:Gm:c:t:a:M:l:A:Q:ivDr:B:h" o; do
	case "$o" in
	d) DIR=$OPTARG ;;
	p) PAYLOADS+=("$OPTARG") ;;
	s) SHARE=$OPTARG ;;
	U) HOSTUSR=1 ;;
	V) VFIO=1 ;;
	f) CMDFILE=$OPTARG ;;
	n) NS+=("size:$OPTARG"); NSPROPS+=("$NEXTPROPS"); NEXTPROPS= ;;
	I) NS+=("file:$OPTARG"); NSPROPS+=("$NEXTPROPS"); NEXTPROPS= ;;
	e) NEXTPROPS=$OPTARG ;;
	N) NVME_OPTS=$OPTARG ;;
	R) ROOTPORT=1 ;;
	q) QMP=$OPTARG ;;
	G) GROUP2=1 ;;
	m) MEM=$OPTARG ;;
	c) CPUS=$OPTARG ;;
	t) TIMEOUT=$OPTARG ;;
	a) ACCEL=$OPTARG ;;
	M) IOMMU=$OPTARG ;;
	l) LOG=$OPTARG ;;
	A) APPEND=$OPTARG ;;
	Q) QARGS+=("$OPTARG") ;;
	i) INTERACTIVE=1 ;;
	v) VERBOSE=1 ;;
	D) FAILDMA=1 ;;
	r) ROOTIMG=$OPTARG ;;
	B) REBOOTS=$OPTARG ;;
	h) usage 0 ;;
	*) usage 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift

die() { echo "vmrun: $*" >&2; exit 125; }
[ -f "$DIR/vmlinuz" ] && [ -f "$DIR/initramfs.cpio.gz" ] ||
	die "no kernel/initramfs in $DIR: run build-initramfs.sh -o $DIR first"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (apt-get install -y qemu-system-x86)"
if [ $INTERACTIVE = 0 ] && [ -z "$CMDFILE" ] && [ $# -eq 0 ]; then
	die "no command given (or use -i)"
fi
if [ -n "$ROOTIMG" ]; then
	[ -f "$ROOTIMG" ] || die "no root image $ROOTIMG (build-rootfs.sh builds it)"
	[ $HOSTUSR = 0 ] && [ ${#PAYLOADS[@]} = 0 ] && [ $VFIO = 0 ] ||
		die "-r does not go with -U, -p or -V (the guest has its own /usr; share files with -s)"
	command -v qemu-img >/dev/null || die "qemu-img missing (apt-get install -y qemu-utils)"
fi

T0=$(date +%s.%N)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vmrun.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- payload
ST=$WORK/stage
mkdir -p "$ST/payload" "$ST/vmrun"
add_elf_deps() { # copy the loader and libraries of ELF file $1 under $ST/usr
	local f=$1 lib dst
	head -c 4 "$f" 2>/dev/null | grep -q 'ELF' || return 0
	ldd "$f" >/dev/null 2>&1 || return 0 # static
	# libgcc_s is dlopen()ed by glibc (pthread_cancel, backtraces): ldd misses it
	{ ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}'
	  for lib in /lib/x86_64-linux-gnu/libgcc_s.so.1 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1; do
		[ -e "$lib" ] && { echo "$lib"; break; }; done; } | while read -r lib; do
		case "$lib" in /usr/*) dst=$lib ;; *) dst=/usr$lib ;; esac
		[ -e "$ST$dst" ] && continue
		mkdir -p "$ST$(dirname "$dst")"
		cp -L "$lib" "$ST$dst"
	done
}
for p in "${PAYLOADS[@]}"; do
	[ -e "$p" ] || die "payload $p not found"
	cp -a "$p" "$ST/payload/"
done
while IFS= read -r -d '' f; do add_elf_deps "$f"; done < <(find "$ST/payload" -type f -perm -u+x -print0)
if [ -n "$CMDFILE" ]; then
	cp "$CMDFILE" "$ST/vmrun/cmd"
elif [ $# -gt 0 ]; then
	printf '%s\n' "$*" > "$ST/vmrun/cmd"
fi
(cd "$ST" && find . -print0 | cpio --null -o -H newc -R 0:0 --quiet) > "$WORK/payload.cpio" ||
	die "cpio failed"
# the kernel only takes an uncompressed archive after a compressed one when it
# starts at a 4-byte aligned offset: pad the base image with zeros
cp "$DIR/initramfs.cpio.gz" "$WORK/initrd"
truncate -s %512 "$WORK/initrd"
cat "$WORK/payload.cpio" >> "$WORK/initrd"
rm -rf "$ST" "$WORK/payload.cpio"

# ---------------------------------------------------------------- machine
case "$ACCEL" in
auto)
	if [ -r /dev/kvm ] && [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
		ACCEL=kvm
	else
		ACCEL=tcg
	fi ;;
kvm|tcg) ;;
*) die "bad -a $ACCEL" ;;
esac
Q=(qemu-system-x86_64 -nodefaults -no-user-config -display none -monitor none
	-serial stdio -no-reboot -m "$MEM" -smp "$CPUS")
if [ $ACCEL = kvm ]; then
	Q+=(-accel kvm -cpu host -machine q35,kernel-irqchip=split)
else
	Q+=(-accel tcg -cpu max -machine q35)
fi
KAPPEND="console=ttyS0 panic=-1 loglevel=4"
[ $VERBOSE = 1 ] && KAPPEND="console=ttyS0 panic=-1 loglevel=7"
case "$IOMMU" in
intel)
	# the vIOMMU must come before the other PCI devices
	Q+=(-device intel-iommu,intremap=on,caching-mode=on)
	KAPPEND+=" intel_iommu=on iommu=pt" ;;
none) ;;
*) die "bad -M $IOMMU" ;;
esac
[ ${#NS[@]} -gt 0 ] || { NS=("size:256M"); NSPROPS=(""); }
BUSARG=
if [ $GROUP2 = 1 ]; then
	# devices behind a conventional PCI bridge share its requester ID, so
	# the IOMMU cannot tell them apart: one group for both
	Q+=(-device pci-bridge,id=br1,chassis_nr=1)
	BUSARG=",bus=br1,addr=1"
	truncate -s 64M "$WORK/nsb.img"
	Q+=(-device nvme,id=nvme1,serial=feedface,bus=br1,addr=2
		-drive "file=$WORK/nsb.img,if=none,id=nvmb,format=raw"
		-device nvme-ns,drive=nvmb,bus=nvme1,nsid=1)
fi
if [ $ROOTPORT = 1 ]; then
	[ $GROUP2 = 1 ] && die "-R and -G do not go together"
	Q+=(-device pcie-root-port,id=rp1,chassis=1,slot=1)
	BUSARG=",bus=rp1"
fi
[ -n "$QMP" ] && Q+=(-qmp "unix:$QMP,server=on,wait=off")
Q+=(-device "nvme,id=nvme0,serial=deadbeef$BUSARG${NVME_OPTS:+,$NVME_OPTS}")
i=1
for n in "${NS[@]}"; do
	lbs=
	case "$n" in
	size:*)
		sz=${n#size:}
		case "$sz" in *:*) lbs=${sz#*:}; sz=${sz%%:*} ;; esac
		img=$WORK/ns$i.img; truncate -s "$sz" "$img" || die "bad size $sz" ;;
	file:*) img=${n#file:}; [ -f "$img" ] || die "no image $img" ;;
	esac
	props=${NSPROPS[$((i - 1))]}
	Q+=(-drive "file=$img,if=none,id=nvm$i,format=raw"
		-device "nvme-ns,drive=nvm$i,bus=nvme0,nsid=$i${lbs:+,logical_block_size=$lbs,physical_block_size=$lbs}${props:+,$props}")
	i=$((i + 1))
done
if [ -n "$SHARE" ]; then
	[ -d "$SHARE" ] || die "share $SHARE is not a folder"
	Q+=(-virtfs "local,path=$(cd "$SHARE" && pwd),mount_tag=share,security_model=none,id=share")
	# the Debian guest's systemd mounts it (fstab), the initramfs does not
	[ -n "$ROOTIMG" ] || KAPPEND+=" vmrun.share=1"
fi
if [ -n "$ROOTIMG" ]; then
	# after the NVMe controller, which stays 0000:00:01.0
	qemu-img create -q -f qcow2 -F raw -b "$(cd "$(dirname "$ROOTIMG")" && pwd)/$(basename "$ROOTIMG")" \
		"$WORK/root.qcow2" || die "qemu-img create failed"
	Q+=(-drive "file=$WORK/root.qcow2,if=virtio,format=qcow2,cache=unsafe")
	# the console is the test's output: no unit status lines, no getty on it
	KAPPEND+=" vmrun.root=/dev/vda systemd.show_status=0"
	[ $INTERACTIVE = 1 ] || KAPPEND+=" systemd.unit=vmrun.target systemd.mask=serial-getty@ttyS0.service"
fi
if [ $HOSTUSR = 1 ]; then
	Q+=(-virtfs "local,path=/usr,mount_tag=hostusr,security_model=none,readonly=on,id=hostusr")
	KAPPEND+=" vmrun.hostusr=1"
fi
[ $VFIO = 1 ] && KAPPEND+=" vmrun.vfio=1"
[ $INTERACTIVE = 1 ] && KAPPEND+=" vmrun.shell=1"
[ -n "$APPEND" ] && KAPPEND+=" $APPEND"
KERNEL=$DIR/vmlinuz
[ -f "$DIR/vmlinux" ] && KERNEL=$DIR/vmlinux # PVH entry: ~3 s faster under TCG
Q+=(-kernel "$KERNEL" -initrd "$WORK/initrd" -append "$KAPPEND" "${QARGS[@]}")

[ "${VMRUN_DEBUG:-0}" = 1 ] && { printf 'vmrun: qemu command:'; printf ' %q' "${Q[@]}"; echo; } >&2
if [ $INTERACTIVE = 1 ]; then
	"${Q[@]}"
	exit $?
fi

# ---------------------------------------------------------------- run
CONSOLE=${LOG:-$WORK/console.log}
: > "$CONSOLE"
# stream the console: everything with -v, else COMMAND's output and vmrun lines
# line by line (sed -u; mawk reads a pipe in blocks unless interactive), so
# that a host watching the output (a test answering the guest's requests)
# sees each line when the guest prints it
AWK=(awk)
awk -W version 2>/dev/null | grep -q mawk && AWK=(awk -W interactive)
# -B: a guest that rebooted (@@VMRUN-REBOOT@@ on the console) boots again
# on the same disks, within what is left of the timeout
BOOTS=0
while :; do
	left=$(echo "$TIMEOUT $T0 $(date +%s.%N)" | awk '{ t = $1 - ($3 - $2); printf "%d", (t > 1 ? t : 1) }')
	timeout -k 10 "$left" "${Q[@]}" < /dev/null 2>&1 | sed -u 's/\r//g' | tee -a "$CONSOLE" |
		"${AWK[@]}" -v all=$VERBOSE '
			/^@@VMRUN-BEGIN@@$/ { inside = 1; next }
			/^@@VMRUN-EXIT=[0-9]+@@$/ { inside = 0; next }
			/^@@VMRUN-REBOOT@@$/ { inside = 0; print "vmrun: the guest reboots"; fflush(); next }
			all || inside || /^vmrun:/ || /Kernel panic|qemu-system-x86_64:/ { print; fflush() }'
	QRC=${PIPESTATUS[0]}
	BOOTS=$((BOOTS + 1))
	[ "$QRC" = 0 ] && [ "$BOOTS" -le "$REBOOTS" ] &&
		[ "$(grep -c '^@@VMRUN-REBOOT@@$' "$CONSOLE")" -ge "$BOOTS" ] || break
done
T1=$(date +%s.%N)
RC=$(sed -n 's/^@@VMRUN-EXIT=\([0-9]*\)@@$/\1/p' "$CONSOLE" | tail -1)
ELAPSED=$(echo "$T1 $T0" | awk '{printf "%.1f", $1-$2}')
if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
	echo "vmrun: timeout after ${TIMEOUT}s (accel=$ACCEL); last console lines:" >&2
	tail -n 30 "$CONSOLE" >&2
	exit 124
fi
if [ -z "$RC" ]; then
	echo "vmrun: guest ended without an exit status (qemu rc=$QRC, accel=$ACCEL); last console lines:" >&2
	tail -n 40 "$CONSOLE" >&2
	exit 125
fi
NFAULT=$(grep -cE 'DMAR: \[DMA (Read|Write)|detected translation failure' "$CONSOLE")
echo "vmrun: exit=$RC accel=$ACCEL wall=${ELAPSED}s" >&2
if [ "$NFAULT" -gt 0 ]; then
	echo "vmrun: WARNING: $NFAULT IOMMU fault line(s) in the console log (DMA outside the mapped IOVAs)" >&2
	[ $FAILDMA = 1 ] && [ "$RC" = 0 ] && exit 126
fi
exit "$RC"
