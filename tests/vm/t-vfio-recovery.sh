#!/bin/sh
# t-vfio-recovery: nvmefsd over VFIO on QEMU's NVMe controller behind a
# hot-pluggable PCIe root port, faults made from the host through QMP while
# fio verifies in the guest (tests/vm/guest-recovery.sh), in one boot:
#   (a) the namespace throttled by QEMU's block layer (block_set_io_throttle,
#       1 IOPS) until commands have outlasted io_timeout_ms: no verify
#       mismatch, no hang, the data intact afterwards;
#   (b) device_del of the controller under load: the guest's removal
#       completes (vfio-pci's request IRQ makes the daemon let go), QEMU
#       reports DEVICE_DELETED, the daemon survives, reads fail at once with
#       EIO;
#   (c) the controller added again (device_add on the same image): attach is
#       refused while it is gone, then brings it back with its data; SIGTERM
#       is clean.
# A DMA outside the mapped IOVAs fails the run (-D).
: "${VM_TIMEOUT:=600}"
. "$(dirname "$0")/lib.sh"
vm_prepare
mkdir -p "$BUILD/test-logs"
for b in nvmefsd nvmefsctl; do
	if [ ! -x "$BUILD/$b" ]; then
		make -C "$ROOT" B="$BUILD" "$BUILD/$b" > "$BUILD/test-logs/vm-recovery.make.log" 2>&1 ||
			{ tail -n 20 "$BUILD/test-logs/vm-recovery.make.log"; fail "building $b failed"; }
	fi
done
command -v fio >/dev/null || skip "fio missing on the host (scripts/deps.sh installs it)"
command -v python3 >/dev/null || skip "python3 missing on the host"
DIR=$VMBIN/recovery
rm -rf "$DIR" && mkdir -p "$DIR"
cp "$BUILD/nvmefsd" "$BUILD/nvmefsctl" "$VM_HERE/guest-recovery.sh" "$VM_HERE/guest/check.sh" "$DIR/"
SHARE=$(mktemp -d "${TMPDIR:-/tmp}/nvmefs-rec.XXXXXX")
QMPS=$SHARE.qmp
IMG=$SHARE.img
truncate -s 256M "$IMG"
LOG=$BUILD/test-logs/vm-recovery.guest.log
HOSTLOG=$BUILD/test-logs/vm-recovery.host.log
: > "$HOSTLOG"
GPID=
cleanup() {
	[ -n "$GPID" ] && kill "$GPID" 2>/dev/null
	rm -rf "$SHARE" "$QMPS" "$IMG"
}
trap cleanup EXIT
cat > "$DIR/cmd.sh" <<'GUEST_EOF'
cp /payload/recovery/check.sh /payload/check.sh
export PATH=/payload/recovery:$PATH
sh /payload/recovery/guest-recovery.sh
GUEST_EOF
Q="python3 $VM_HERE/qmp.py $QMPS"
throttle() { # IOPS (0: off)
	$Q block_set_io_throttle "{\"device\": \"nvm1\", \"bps\": 0, \"bps_rd\": 0, \"bps_wr\": 0, \"iops\": $1, \"iops_rd\": 0, \"iops_wr\": 0}" >> "$HOSTLOG" 2>&1
}
: > "$LOG"
vm_run "$LOG" -V -U -R -q "$QMPS" -s "$SHARE" -I "$IMG" -p "$DIR" -f "$DIR/cmd.sh" > /dev/null 2>&1 &
GPID=$!
# answer the guest's requests until it ends
done_reqs=
while kill -0 "$GPID" 2>/dev/null; do
	for req in throttle-on throttle-off remove replug; do
		case " $done_reqs " in *" $req "*) continue ;; esac
		grep -q "^@@HOST $req@@" "$LOG" || continue
		done_reqs="$done_reqs $req"
		echo "host: $req at $(date +%T.%N)" >> "$HOSTLOG"
		case $req in
		throttle-on) throttle 1 ;;
		throttle-off) throttle 0 ;;
		remove)
			# the reply comes at once; DEVICE_DELETED once the guest let go
			$Q device_del '{"id": "nvme0"}' --event DEVICE_DELETED --timeout 60 > "$SHARE.del" 2>&1 &
			DELPID=$!
			;;
		replug)
			# QEMU must have finished the deletion: DEVICE_DELETED of the
			# namespace, sent while its controller is being taken apart
			if [ -n "${DELPID:-}" ]; then
				wait "$DELPID"
				delrc=$?
				DELPID=
			fi
			# the old drive may linger with its lock: open the image without
			# one; nvme with drive= makes it namespace 1, as before
			$Q blockdev-add "{\"driver\": \"raw\", \"node-name\": \"nvm1b\", \"file\": {\"driver\": \"file\", \"filename\": \"$IMG\", \"locking\": \"off\"}}" >> "$HOSTLOG" 2>&1
			$Q device_add '{"driver": "nvme", "id": "nvme0", "serial": "deadbeef", "bus": "rp1", "drive": "nvm1b"}' >> "$HOSTLOG" 2>&1
			;;
		esac
		touch "$SHARE/ack-$req"
	done
	sleep 0.2
done
wait "$GPID"
rc=$?
GPID=
cat "$LOG"
echo "---- host side"
cat "$HOSTLOG"
[ -n "${DELPID:-}" ] && { wait "$DELPID"; delrc=$?; }
cat "$SHARE.del" 2>/dev/null
[ $rc = 0 ] || fail "a check failed in the guest (vmrun exit $rc)"
[ "${delrc:-1}" = 0 ] || fail "QEMU did not report DEVICE_DELETED within 60 s of device_del"
grep -q '"DEVICE_DELETED"' "$SHARE.del" || fail "no DEVICE_DELETED event"
expect "$LOG" "^vmrun: 0000:01:00.0: bound to vfio-pci" "the controller was not bound to vfio-pci"
grep -q '^NOT OK' "$LOG" && fail "a check failed"
expect "$LOG" '^ok: the guest.s removal completed' "the removal did not complete"
expect "$LOG" '^ok: attach$' "attach after the controller came back failed"
expect "$LOG" '^ok: the data written before the removal reads back' "data lost across removal and attach"
expect "$LOG" '^ok: SIGTERM: daemon exit 0' "SIGTERM after the removal was not clean"
echo "nvmefsd over VFIO: throttled namespace, hot removal under fio verify, and attach after replug"
