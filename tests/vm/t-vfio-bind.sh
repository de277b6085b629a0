#!/bin/sh
# t-vfio-bind: scripts/vfio-bind in the guest.  It refuses, changing
# nothing, while a namespace (or a partition of it) is mounted, used as swap
# or open by a process; binds to vfio-pci (idempotently); refuses to unbind
# while the VFIO group is open; gives the controller back to nvme with the
# data intact; rejects bad arguments.  (The IOMMU-group refusal needs two
# devices in one group: t-vfio-errors covers it.  Holders such as LVM or MD
# are checked the same way as /sys/block/*/holders, but the guest has no
# device-mapper to make one.)
. "$(dirname "$0")/lib.sh"
vm_prepare
vm_build_smoke
GUEST=$VMBIN/t-vfio-bind.guest.sh
cat > "$GUEST" <<'GUEST_EOF'
. /payload/check.sh
BDF=0000:00:01.0
NS=/dev/nvme0n1
G=$(basename "$(readlink /sys/bus/pci/devices/$BDF/iommu_group)")
c "starts on nvme" [ "$(driver_of $BDF)" = nvme ] && [ -b $NS ]
t "usage without arguments" fail "Usage: vfio-bind BDF" vfio-bind
t "not a BDF" fail "'nvme0' is not a PCI address" vfio-bind nvme0
t "no such device" fail "0000:07:00.0: no such PCI device" vfio-bind 0000:07:00.0
t "--check says it can be bound" ok "$BDF: can be bound to vfio-pci" vfio-bind --check $BDF

# a marker far from what the file systems below touch, to check after the round trip
marker="nvmefs-vfio-bind-$(cat /proc/sys/kernel/random/uuid)"
echo "$marker" | dd of=$NS bs=512 seek=400000 conv=notrunc 2>/dev/null

mkdir -p /mnt/x
mkdosfs $NS > /dev/null && mount -t msdos $NS /mnt/x && echo kept > /mnt/x/file
t "refused while mounted" fail "$BDF: $NS is mounted on /mnt/x" vfio-bind $BDF
c "... and nothing changed" [ "$(driver_of $BDF)" = nvme ] && [ "$(cat /mnt/x/file)" = kept ]
umount /mnt/x

mkswap $NS > /dev/null && swapon $NS
t "refused while used as swap" fail "$BDF: $NS is used as swap" vfio-bind $BDF
swapoff $NS

sleep 30 < $NS &
holder=$!
usleep 200000
t "refused while open by a process" fail "$BDF: $NS is open by $holder \(sleep\)" vfio-bind $BDF
kill $holder; wait $holder 2>/dev/null

# a partition: its mount counts too
printf 'o\nn\np\n1\n2048\n+32M\nw\n' | fdisk $NS > /dev/null 2>&1
wait_path ${NS}p1
mkdosfs ${NS}p1 > /dev/null && mount -t msdos ${NS}p1 /mnt/x
t "refused while a partition is mounted" fail "$BDF: ${NS}p1 is mounted on /mnt/x" vfio-bind $BDF
umount /mnt/x
c "still on nvme after every refusal" [ "$(driver_of $BDF)" = nvme ]

t "binds once released" ok "$BDF: bound to vfio-pci \(was nvme\), IOMMU group $G, /dev/vfio/$G" vfio-bind $BDF
c "... on vfio-pci, /dev/vfio/$G there, $NS gone" \
	[ "$(driver_of $BDF)" = vfio-pci ] && [ -c /dev/vfio/$G ] && wait_path ! $NS
t "binding again is a no-op" ok "$BDF: already bound to vfio-pci" vfio-bind $BDF
t "the bus opens it" ok "opened and closed $BDF" vfio-smoke -o $BDF

sh -c "exec 3<>/dev/vfio/$G; echo held > /tmp/held; sleep 30" &
holder=$!
wait_path /tmp/held
t "unbind refused while the group is open" fail "/dev/vfio/$G is open by [0-9]+ \(sh|sleep\)" vfio-bind --unbind $BDF
c "... still on vfio-pci" [ "$(driver_of $BDF)" = vfio-pci ]
kill $holder; wait $holder 2>/dev/null

t "unbind gives it back to nvme" ok "$BDF: bound to nvme \(was vfio-pci\)" vfio-bind --unbind $BDF
c "... the namespace is back with its data" wait_path $NS
c "... marker intact" [ "$(dd if=$NS bs=512 skip=400000 count=1 2>/dev/null | head -n 1)" = "$marker" ]
t "unbind again is a no-op" ok "$BDF: already bound to nvme" vfio-bind --unbind $BDF
done_checks
GUEST_EOF
LOG=$BUILD/test-logs/vm-bind.guest.log
mkdir -p "$(dirname "$LOG")"
vm_run "$LOG" -p "$VMBIN/vfio-smoke" -p "$VM_HERE/guest/check.sh" -f "$GUEST" ||
	fail "a check failed in the guest"
expect "$LOG" '^checks: 2[0-9] ok, 0 not ok' "not every check ran"
echo "vfio-bind behaved"
