#!/bin/sh
# t-vfio-recovery: nvmefsd over VFIO on QEMU's NVMe controller behind a
# hot-pluggable PCIe root port, faults made from the host through QMP while
# fio verifies in the guest (tests/vm/guest-recovery.sh), in one boot:
#   (0) SMART critical warnings set through QOM (smart_critical_warning):
#       each raises an asynchronous event the daemon shows in its metrics
#       and status within seconds; cleared by the next timed read;
#   (a) the namespace throttled by QEMU's block layer (block_set_io_throttle,
#       1 IOPS) until commands have outlasted io_timeout_ms: no verify
#       mismatch, no hang, the data intact afterwards;
#   (b) PCIe errors injected at the root port (HMP pcie_aer_inject_error
#       through QMP human-monitor-command) under load: a correctable one
#       resets nothing; an uncorrectable non-fatal one goes through the
#       guest's AER recovery to vfio-pci's error eventfd, and the daemon
#       resets the controller: no verify mismatch, no error, data intact;
#   (c) device_del of the controller under load: the guest's removal
#       completes (vfio-pci's request IRQ makes the daemon let go), QEMU
#       reports DEVICE_DELETED, the daemon survives, reads fail at once with
#       EIO;
#   (d) the controller added again on the same image with 4 KiB blocks
#       instead of 512 B: attach is refused while it is gone, then refused
#       because its namespaces changed; the file fails with EIO;
#   (e) it is removed and added with 512-byte blocks again: attach brings it
#       back with its data, and a PCIe error resets it again;
#   (f) removed and added with 4 KiB blocks once more: attach refused again,
#       EIO, and SIGTERM is clean.
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
hmp() { # an HMP command; its reply (JSON) goes to the host log
	$Q human-monitor-command "{\"command-line\": \"$1\"}" >> "$HOSTLOG" 2>&1
}
# device_add the controller on the node nvm1b (made once, on the same image)
# with these block properties; retried while QEMU is still taking the old one
# apart (the node stays in use until then)
plug() {
	if [ -z "${NODE:-}" ]; then
		# the old drive may linger with its lock: open the image without
		# one; nvme with drive= makes it namespace 1, as before
		$Q blockdev-add "{\"driver\": \"raw\", \"node-name\": \"nvm1b\", \"file\": {\"driver\": \"file\", \"filename\": \"$IMG\", \"locking\": \"off\"}}" >> "$HOSTLOG" 2>&1 &&
			NODE=nvm1b
	fi
	n=0
	until $Q device_add "{\"driver\": \"nvme\", \"id\": \"nvme0\", \"serial\": \"deadbeef\", \"bus\": \"rp1\", \"drive\": \"nvm1b\"$1}" >> "$HOSTLOG" 2>&1; do
		n=$((n + 1))
		[ $n -lt 50 ] || return 1
		sleep 0.2
	done
}
warn() { # the controller's SMART critical warning bits
	$Q qom-set "{\"path\": \"/machine/peripheral/nvme0\", \"property\": \"smart_critical_warning\", \"value\": $1}" >> "$HOSTLOG" 2>&1 ||
		echo "host: qom-set smart_critical_warning failed" >> "$HOSTLOG"
}
throttle() { # IOPS (0: off)
	$Q block_set_io_throttle "{\"device\": \"nvm1\", \"bps\": 0, \"bps_rd\": 0, \"bps_wr\": 0, \"iops\": $1, \"iops_rd\": 0, \"iops_wr\": 0}" >> "$HOSTLOG" 2>&1
}
: > "$LOG"
vm_run "$LOG" -V -U -R -q "$QMPS" -s "$SHARE" -I "$IMG" -p "$DIR" -f "$DIR/cmd.sh" > /dev/null 2>&1 &
GPID=$!
# answer the guest's requests until it ends
done_reqs=
while kill -0 "$GPID" 2>/dev/null; do
	for req in warn-spare warn-temp warn-clear throttle-on throttle-off aer-cor aer-nonfatal remove replug-4k swap-512 aer-again swap-4k; do
		case " $done_reqs " in *" $req "*) continue ;; esac
		grep -q "^@@HOST $req@@" "$LOG" || continue
		done_reqs="$done_reqs $req"
		echo "host: $req at $(date +%T.%N)" >> "$HOSTLOG"
		case $req in
		# QEMU's NVMe model raises a SMART event for each bit newly set
		warn-spare) warn 1 ;;
		warn-temp) warn 3 ;;
		warn-clear) warn 0 ;;
		throttle-on) throttle 1 ;;
		throttle-off) throttle 0 ;;
		# at the root port: QEMU's NVMe model has no AER capability, and its
		# Device Control error-reporting bits are read-only zero, so an error
		# injected at the function goes nowhere
		aer-cor) hmp "pcie_aer_inject_error -c rp1 RCVR" ;;
		aer-nonfatal | aer-again) hmp "pcie_aer_inject_error rp1 COMP_TIME" ;;
		remove)
			# the reply comes at once; DEVICE_DELETED once the guest let go
			$Q device_del '{"id": "nvme0"}' --event DEVICE_DELETED --timeout 60 > "$SHARE.del" 2>&1 &
			DELPID=$!
			;;
		replug-4k)
			# QEMU must have finished the deletion: DEVICE_DELETED of the
			# namespace, sent while its controller is being taken apart
			if [ -n "${DELPID:-}" ]; then
				wait "$DELPID"
				delrc=$?
				DELPID=
			fi
			plug ', "logical_block_size": 4096, "physical_block_size": 4096' || echo "host: device_add failed" >> "$HOSTLOG"
			;;
		swap-512 | swap-4k)
			$Q device_del '{"id": "nvme0"}' --event DEVICE_DELETED --timeout 60 >> "$HOSTLOG" 2>&1 ||
				echo "host: no DEVICE_DELETED after device_del ($req)" >> "$HOSTLOG"
			if [ $req = swap-4k ]; then
				plug ', "logical_block_size": 4096, "physical_block_size": 4096'
			else
				plug ''
			fi || echo "host: device_add failed ($req)" >> "$HOSTLOG"
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
grep -q '^host: .*failed\|^host: no ' "$HOSTLOG" && fail "a QMP request failed (see the host side above)"
n=$(grep -c '^"OK id: rp1 ' "$HOSTLOG")
[ "$n" = 3 ] || fail "pcie_aer_inject_error at rp1 was not taken three times (got $n OK replies)"
expect "$LOG" '^ok: spare below threshold in the metrics' "QEMU's SMART warning event was not seen"
expect "$LOG" '^ok: cleared in the metrics by the next health read' "the cleared warning stayed"
expect "$LOG" '^ok: the daemon logged the PCIe error and reset the controller' "no reset after the PCIe error"
expect "$LOG" '^ok: the daemon was not told of the correctable error' "a correctable PCIe error reached the daemon"
expect "$LOG" '^ok: fio ended \(no hang\), no verify mismatch, no error but' "fio across the AER reset"
expect "$LOG" '^ok: attach: refused, the namespaces changed' "attach was not refused for the changed namespace"
expect "$LOG" '^ok: a write fails with EIO' "the file with the changed namespace did not fail with EIO"
expect "$LOG" '^ok: attach$' "attach after the controller came back failed"
expect "$LOG" '^ok: the data written before the removal reads back' "data lost across removal and attach"
expect "$LOG" '^ok: after attach, a PCIe error still resets the controller' "no reset for a PCIe error after attach"
expect "$LOG" '^ok: attach: refused again' "the second attach on 4 KiB blocks was not refused"
expect "$LOG" '^ok: SIGTERM: daemon exit 0' "SIGTERM after the refused attach was not clean"
echo "nvmefsd over VFIO: throttled namespace, PCIe errors (AER), hot removal under fio verify, attach refused for a changed namespace and taken after the original came back"
