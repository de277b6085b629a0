#!/bin/sh
# t-vfio-limits: nvmefsd over VFIO on a QEMU NVMe controller whose limits
# differ from the default one, in one boot:
#   - two namespaces, 64 MiB of 512 B blocks and 32 MiB of 4 KiB blocks:
#     both files appear with the right st_size, dd+cmp on each, and a 512 B
#     write into the 4 KiB namespace (read-modify-write) matches a model;
#   - MDTS 2 (16 KiB): the daemon logs the limit, and a 1 MiB O_DIRECT write
#     and read on each namespace come back intact, as at least 64 commands
#     each (QEMU fails a command over MDTS, so an unsplit one would show);
#   - max_ioqpairs=1 with queues = 2 in the config: the daemon says it got
#     one queue and runs one reactor (nvmefsctl stats shows one queue pair),
#     and I/O works.
# queue_depth is 256: a request split into more commands than the queue
# holds (1 MiB / 16 KiB = 64 > 63 with queue_depth 64) fails with EIO
# instead of being issued in turns.
# A DMA outside the mapped IOVAs fails the run (-D).
# under TCG on a loaded host a boot can take minutes: allow 10 minutes
: "${VM_TIMEOUT:=600}"
. "$(dirname "$0")/lib.sh"
vm_prepare
mkdir -p "$BUILD/test-logs"
for b in nvmefsd nvmefsctl; do
	if [ ! -x "$BUILD/$b" ]; then
		make -C "$ROOT" B="$BUILD" "$BUILD/$b" > "$BUILD/test-logs/vm-limits.make.log" 2>&1 ||
			{ tail -n 20 "$BUILD/test-logs/vm-limits.make.log"; fail "building $b failed"; }
	fi
done
command -v python3 >/dev/null || skip "python3 missing on the host"
DIR=$VMBIN/limits
rm -rf "$DIR" && mkdir -p "$DIR"
cp "$BUILD/nvmefsd" "$BUILD/nvmefsctl" "$DIR/"
cp "$VM_HERE/guest/check.sh" "$VMBIN/check.sh"
GUEST=$DIR/cmd.sh
cat > "$GUEST" <<'GUEST_EOF'
. /payload/check.sh
export PATH=/payload/limits:$PATH
DD=/usr/bin/dd CMP=/usr/bin/cmp
W=/tmp/limits
MNT=$W/mnt
CONF=$W/nvmefs.conf
LOG=$W/daemon.log
mkdir -p $W
cat > $CONF <<CONF_END
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_owner = 0
file_group = 0
[engine]
queues = 2
queue_depth = 256
mode = interrupt
io_timeout_ms = 30000
[controller nvme0]
device = 0000:00:01.0
CONF_END
nvmefsd -f -c $CONF > $LOG 2>&1 &
DPID=$!
i=0
while { [ ! -f $MNT/nvme0n1 ] || [ ! -f $MNT/nvme0n2 ]; } && [ $i -lt 600 ] && kill -0 $DPID 2>/dev/null; do
	usleep 100000; i=$((i + 1))
done
sed 's/^/    daemon: /' $LOG
c "both namespace files appear" [ -f $MNT/nvme0n1 ] && [ -f $MNT/nvme0n2 ]
c "nvme0n1 (512 B blocks): st_size 64 MiB" [ "$(stat -c %s $MNT/nvme0n1)" = $((64 << 20)) ]
c "nvme0n2 (4 KiB blocks): st_size 32 MiB" [ "$(stat -c %s $MNT/nvme0n2)" = $((32 << 20)) ]
c "the daemon logs the granted queue count" grep -q "asked for 2 I/O queues, the controller granted 1" $LOG
c "... and runs one reactor" grep -q "nvme0 grants 1 I/O queue: 1 reactor" $LOG
c "... ready with 2 namespaces, 1 reactor" grep -Eq "ready: 2 namespaces .*, 1 reactor," $LOG
c "the daemon logs MDTS 2 as 16 KiB" grep -q "max transfer 16 KiB" $LOG
# stats KEY: totals.KEY; errors: totals.errors.total; reactors, qpairs: how many
stats() {
	nvmefsctl -c $CONF --json stats | python3 -c '
import json, sys
d = json.load(sys.stdin)
k = sys.argv[1]
if k == "qpairs":
    print(sum(len(r["qpairs"]) for r in d["reactors"]))
elif k == "reactors":
    print(len(d["reactors"]))
elif k == "errors":
    print(d["totals"]["errors"]["total"])
else:
    print(d["totals"][k])' "$1"
}
c "nvmefsctl stats: one reactor, one queue pair" [ "$(stats reactors)" = 1 ] && [ "$(stats qpairs)" = 1 ]

head -c $((4 << 20)) /dev/urandom > $W/data
head -c $((1 << 20)) /dev/urandom > $W/big
for n in 1 2; do
	F=$MNT/nvme0n$n
	t "nvme0n$n: dd 4 MiB" ok "" $DD if=$W/data of=$F bs=64k conv=notrunc status=none
	t "nvme0n$n: cmp" ok "" $CMP -n $((4 << 20)) $W/data $F
	s0=$(stats submitted)
	t "nvme0n$n: 1 MiB O_DIRECT write" ok "" $DD if=$W/big of=$F bs=1M seek=8 count=1 oflag=direct conv=notrunc status=none
	s1=$(stats submitted)
	rd() { $DD if=$F bs=1M skip=8 count=1 iflag=direct status=none | $CMP - $W/big; }
	t "nvme0n$n: 1 MiB O_DIRECT read matches" ok "" rd
	s2=$(stats submitted)
	c "nvme0n$n: the 1 MiB write took >= 64 commands ($((s1 - s0)))" [ $((s1 - s0)) -ge 64 ]
	c "nvme0n$n: the 1 MiB read took >= 64 commands ($((s2 - s1)))" [ $((s2 - s1)) -ge 64 ]
done
# a 512 B write inside a 4 KiB block: read-modify-write
$DD if=$MNT/nvme0n2 of=$W/model bs=64k count=1 status=none
head -c 512 /dev/urandom > $W/piece
$DD if=$W/piece of=$W/model bs=512 seek=9 conv=notrunc status=none
t "nvme0n2: 512 B write at 4608 (inside a 4 KiB block)" ok "" $DD if=$W/piece of=$MNT/nvme0n2 bs=512 seek=9 conv=notrunc status=none
rmw() { $DD if=$MNT/nvme0n2 bs=64k count=1 iflag=direct status=none | $CMP - $W/model; }
t "... matches the model" ok "" rmw
c "no I/O errors counted" [ "$(stats errors)" = 0 ]
kill -TERM $DPID
wait $DPID
rc=$?
c "SIGTERM: exit 0 (got $rc)" [ $rc = 0 ]
done_checks
GUEST_EOF
LOG=$BUILD/test-logs/vm-limits.guest.log
vm_run "$LOG" -V -U -n 64M -n 32M:4096 -N mdts=2,max_ioqpairs=1 -p "$DIR" -p "$VMBIN/check.sh" -f "$GUEST" ||
	fail "a check failed in the guest"
expect "$LOG" "^vmrun: $BDF: bound to vfio-pci" "the controller was not bound to vfio-pci"
expect "$LOG" '^checks: 2[0-9] ok, 0 not ok' "not every check ran"
echo "two namespaces, MDTS 16 KiB and one granted queue handled over VFIO"
