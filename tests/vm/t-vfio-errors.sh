#!/bin/sh
# t-vfio-errors: vfio_bus_open refuses what it cannot use, says why and what
# to do, and leaves the device as it was.  One boot with two controllers
# behind a conventional PCI bridge (one IOMMU group, -G):
#   - the controller still on nvme: "bind it with: vfio-bind BDF"
#   - a BDF that does not exist, a string that is not a BDF
#   - the group not viable (the other controller still on nvme), naming it;
#     vfio-bind refuses the same situation before changing anything
#   - the group open in another process (EBUSY), naming the process that holds it
#   - a locked-memory limit too small for the DMA buffers (as a non-root
#     user, who is subject to RLIMIT_MEMLOCK): names the limit and the fix
#   - after all that, the full smoke test still passes on the controller.
. "$(dirname "$0")/lib.sh"
vm_prepare
vm_build_smoke
GUEST=$VMBIN/t-vfio-errors.guest.sh
cat > "$GUEST" <<'GUEST_EOF'
. /payload/check.sh
bdf_of() { for c in /sys/bus/pci/devices/*/nvme/nvme*; do
	[ "$(cat $c/serial 2>/dev/null | tr -d ' ')" = "$1" ] && { basename "$(dirname "$(dirname "$c")")"; return; }; done; }
A=$(bdf_of deadbeef)
B=$(bdf_of feedface)
G=$(basename "$(readlink /sys/bus/pci/devices/$A/iommu_group)")
GB=$(basename "$(readlink /sys/bus/pci/devices/$B/iommu_group)")
echo "controller A $A, B $B, IOMMU groups $G and $GB"
c "both controllers share one IOMMU group" [ -n "$A" ] && [ -n "$B" ] && [ "$G" = "$GB" ]

t "refused while bound to nvme, says how to bind" fail \
	"$A: bound to nvme, not vfio-pci: bind it with: vfio-bind $A" vfio-smoke -o $A
c "still on nvme, namespace still there" [ "$(driver_of $A)" = nvme ] && [ -b /dev/nvme0n1 -o -b /dev/nvme1n1 ]
t "nonexistent BDF" fail "0000:07:00.0: no such PCI device" vfio-smoke -o 0000:07:00.0
t "not a BDF" fail "'nvme0' is not a PCI address" vfio-smoke -o nvme0
t "vfio-bind refuses a group with a device on a kernel driver" fail \
	"$A: IOMMU group $G also holds devices bound to kernel drivers:" vfio-bind $A
t "... naming it and its driver" fail "^vfio-bind: +$B \(nvme\)$" vfio-bind $A
c "vfio-bind changed nothing" [ "$(driver_of $A)" = nvme ]

# bind A alone by hand, behind vfio-bind's back
echo vfio-pci > /sys/bus/pci/devices/$A/driver_override
echo $A > /sys/bus/pci/devices/$A/driver/unbind
echo $A > /sys/bus/pci/drivers_probe
wait_path /dev/vfio/$G
t "group not viable" fail "IOMMU group $G is not viable" vfio-smoke -o $A
t "... names the other device, its driver and the fix" fail \
	"$B in IOMMU group $G is bound to nvme: bind it to vfio-pci too \(vfio-bind $B\)" vfio-smoke -o $A
c "... and only that one (not the bridge, which has no driver)" \
	[ "$(vfio-smoke -o $A 2>&1 | grep -c "in IOMMU group $G is bound")" = 1 ]

t "vfio-bind the other one" ok "$B: bound to vfio-pci" vfio-bind $B
t "now it opens (short BDF form too)" ok "opened and closed $A" vfio-smoke -o ${A#0000:}

# the group held open by another process
sh -c "exec 3<>/dev/vfio/$G; echo held > /tmp/held; sleep 30" &
holder=$!
wait_path /tmp/held
t "group in use: EBUSY, names the holder" fail "/dev/vfio/$G is in use by pid $holder \(" vfio-smoke -o $A
kill $holder; wait $holder 2>/dev/null

# a small locked-memory limit, as a user without CAP_IPC_LOCK
echo "tester:x:1000:1000::/tmp:/bin/sh" >> /etc/passwd
chown 1000 /dev/vfio/$G
t "memlock too low: names RLIMIT_MEMLOCK and how to raise it" fail \
	"cannot pin 4 KiB for DMA: .*RLIMIT_MEMLOCK\) is 8 KiB.*ulimit -l unlimited.*LimitMEMLOCK=infinity" \
	su -s /bin/sh tester -c "ulimit -l 8; exec /payload/vfio-smoke $A"
t "the same user with a sufficient limit passes" ok "vfio-smoke: PASS" \
	su -s /bin/sh tester -c "ulimit -l 1024; exec /payload/vfio-smoke $A"
chown 0 /dev/vfio/$G
t "and root passes the whole smoke test" ok "vfio-smoke: PASS" vfio-smoke $A
done_checks
GUEST_EOF
LOG=$BUILD/test-logs/vm-errors.guest.log
mkdir -p "$(dirname "$LOG")"
vm_run "$LOG" -G -p "$VMBIN/vfio-smoke" -p "$VM_HERE/guest/check.sh" -f "$GUEST" ||
	fail "a check failed in the guest"
expect "$LOG" '^checks: 1[0-9] ok, 0 not ok' "not every check ran"
echo "error paths refused as expected"
