# guest-export-nvmet.sh - in the guest (busybox sh; host /usr shared for
# nvme-cli, fio, dd, cmp, blockdev): a namespace file of nvmefsd served over
# NVMe/TCP by the kernel's target (nvmet) and used through the kernel's
# initiator (nvme-tcp) in the same guest, on 127.0.0.1:4420.
#   sh guest-export-nvmet.sh
# nvmefsd (software controller, file-backed, /dev/fuse) runs under the fd
# store stand-in (fdstore), so that a kill -9 is adopted as under systemd.
# The export is made by scripts/nvmefs-export (what nvmefs-nvmet@.service
# runs).  Checks: start and a refused second start; configfs shows the
# namespace with buffered_io 0; a host not in ALLOWED_HOSTS is refused, the
# allowed host without its DH-HMAC-CHAP secret is refused, with it connects;
# the device has the file's size, 4 KiB blocks, a volatile write cache and
# FUA; data written through either side reads back through the other; a
# Flush from the initiator (nvme flush) reaches the software controller, a
# write without one sends none, an O_DSYNC write goes out as FUA; fio
# (libaio, direct, iodepth 16, crc32c verify) while nvmefsd is killed with
# -9 once (adopted, requests resent): fio's JSON goes to /mnt/share/fio.json
# for the host to check, the controller stays live with no reset or I/O
# error; disconnect, stop: nothing left in configfs; SIGTERM stops nvmefsd.
# Prints "checks: N ok, M not ok"; exit 1 on a failed check.
. /payload/check.sh
P=/payload/export
W=/run/nvx
MNT=$W/mnt
LOG=$W/daemon.log
F=$MNT/nvme0n1
NQN=nqn.2014-08.io.nvmefs.test:nvme0n1
H1=nqn.2014-08.io.nvmefs.test:host1
HID=$(cat /proc/sys/kernel/random/uuid)
X="sh $P/nvmefs-export"
CTL="$P/nvmefsctl -s $W/admin.sock"
# busybox sh prefers its own applets: name the host's tools by path
DD=/usr/bin/dd CMP=/usr/bin/cmp BLOCKDEV=/usr/sbin/blockdev

ip link set lo up
grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs configfs /sys/kernel/config
# adopting the mount after a kill -9 finds the connection there on kernels
# before 6.16 (systemd mounts it on a host: sys-fs-fuse-connections.mount)
grep -q ' /sys/fs/fuse/connections ' /proc/mounts || mount -t fusectl fusectl /sys/fs/fuse/connections
mkdir -p -m 0700 $W
cat > $W/nvmefs.conf <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_owner = 0
file_group = 0
fuse_transport = classic
[engine]
queues = 1
queue_depth = 64
[controller nvme0]
device = sim
size = 128M
block_size = 4096
backing = $W/%c-%n.img
exec = thread
EOF
$P/fdstore -p $W/pid -s $W/notify -a -n 3 -- $P/nvmefsd -f -c $W/nvmefs.conf > $LOG 2>&1 &
SPID=$!
i=0
until grep -q "fdstore: stored fuse-state" $LOG; do
	i=$((i + 1))
	[ $i -gt 300 ] && { cat $LOG; echo "NOT OK: nvmefsd did not start"; exit 1; }
	usleep 100000
done
echo "nvmefsd up @ $(cut -d' ' -f1 /proc/uptime)s"

# writes: the write requests the daemon answered on the namespace file
writes() { $CTL stats --json | tr -d ' \n' | grep -o '"write":{"count":[0-9]*' | head -n 1 | grep -o '[0-9]*$'; }
# fuse STAT: a figure of the daemon's FUSE front end (JSON without python)
fuse() { $CTL stats --json | tr -d ' \n' | grep -o "\"$1\":[0-9]*" | head -n 1 | cut -d: -f2; }
# sim STAT: a counter of the software controller itself (its SIGUSR1 line)
sim() {
	n=$(grep -c "stats: nvme0: sim " $LOG)
	kill -USR1 "$(cat $W/pid)"
	i=0
	while [ "$(grep -c "stats: nvme0: sim " $LOG)" -le "$n" ] && [ $i -lt 50 ]; do usleep 100000; i=$((i + 1)); done
	grep "stats: nvme0: sim " $LOG | tail -n 1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}

mkdir -p /etc/nvmefs/export
key=$(nvme gen-dhchap-key --nqn=$H1 2>/dev/null | grep -o 'DHHC-1:[^ ]*')
echo "$H1 $key" > /etc/nvmefs/export/hosts.keys
chmod 600 /etc/nvmefs/export/hosts.keys
cat > /etc/nvmefs/export/nvme0n1.conf <<EOF
FILE=$F
NQN=$NQN
ALLOWED_HOSTS=$H1
DHCHAP_KEYS=/etc/nvmefs/export/hosts.keys
EOF
echo "== export"
t "nvmefs-export nvmet start" ok "is namespace 1 of $NQN on 127.0.0.1:4420" $X nvmet start nvme0n1
t "a second start is refused" fail "already a subsystem" $X nvmet start nvme0n1
t "status: the namespace file, enabled, buffered_io 0, the port" ok "namespace 1: $F, enabled 1, buffered_io 0 .*port [0-9]+: tcp 127.0.0.1:4420" \
	sh -c "$X nvmet status nvme0n1 | tr '\n' ' '"

echo "== access"
ls /dev/nvme*n* > $W/before 2>/dev/null
connect() { nvme connect -t tcp -a 127.0.0.1 -s 4420 -n $NQN --hostid=$HID "$@"; }
t "a host not allowed is refused" fail "." connect --hostnqn=nqn.2014-08.io.nvmefs.test:intruder
t "the allowed host without its secret is refused" fail "." connect --hostnqn=$H1
t "the allowed host with its DH-HMAC-CHAP secret connects" ok "" connect --hostnqn=$H1 --dhchap-secret="$key"
i=0
D=
while [ -z "$D" ] && [ $i -lt 50 ]; do
	D=$(ls /dev/nvme*n* 2>/dev/null | grep -vxF -f $W/before | head -n 1)
	usleep 100000
	i=$((i + 1))
done
B=$(basename "$D")
C=
for c in /sys/class/nvme/nvme*; do [ "$(cat $c/transport)" = tcp ] && C=$c; done
c "a block device appeared ($D, controller $C)" [ -b "$D" -a -n "$C" ]
t "the device has the namespace file's size" ok "^$((128 << 20))\$" $BLOCKDEV --getsize64 $D
t "4 KiB logical blocks (nvmet: the file's i_blkbits, at most 12)" ok "^4096\$" $BLOCKDEV --getss $D
t "a volatile write cache and FUA" ok "^write back 1\$" sh -c "echo \$(cat /sys/block/$B/queue/write_cache) \$(cat /sys/block/$B/queue/fua)"

echo "== data"
head -c $((1 << 20)) /dev/urandom > $W/a
head -c $((1 << 20)) /dev/urandom > $W/b
t "write 1 MiB through the device" ok "" $DD if=$W/a of=$D bs=64k seek=16 oflag=direct status=none
t "... the namespace file has it" ok "" sh -c "$DD if=$F bs=64k skip=16 count=16 iflag=direct status=none | $CMP - $W/a"
t "write 1 MiB through the file" ok "" $DD if=$W/b of=$F bs=64k seek=64 oflag=direct conv=notrunc status=none
t "... the device has it" ok "" sh -c "$DD if=$D bs=64k skip=64 count=16 iflag=direct status=none | $CMP - $W/b"

echo "== flushes"
f0=$(fuse flushes_sent) s0=$(sim flushes)
$DD if=$W/a of=$D bs=4k count=8 oflag=direct status=none
f1=$(fuse flushes_sent) s1=$(sim flushes)
t "nvme flush from the initiator" ok "" nvme flush $D -n 1
f2=$(fuse flushes_sent) s2=$(sim flushes)
u0=$(fuse fua_writes) q0=$(sim fua_writes)
$DD if=$W/a of=$D bs=4k count=8 oflag=direct,dsync status=none
u1=$(fuse fua_writes) q1=$(sim fua_writes)
echo "Flush commands: $((f1 - f0)) after 8 plain writes, $((f2 - f1)) after nvme flush (device: $((s1 - s0)), $((s2 - s1))); FUA writes after 8 O_DSYNC writes: $((u1 - u0)) (device: $((q1 - q0)))"
c "writes without a flush send no Flush" [ "$f1" = "$f0" -a "$s1" = "$s0" ]
c "the initiator's flush reaches the device as a Flush" [ "$f2" -gt "$f1" -a "$s2" -gt "$s1" ]
c "O_DSYNC writes (FUA on the wire) reach the device with FUA" [ "$u1" -ge $((u0 + 8)) -a "$q1" -ge $((q0 + 8)) ]

echo "== kill -9 under fio"
# the kill once fio writes: the daemon has taken 300 writes more, the
# device holds commands 50 ms, so requests are in flight at the kill
w0=$(writes)
(
	i=0
	while [ $i -lt 1200 ]; do
		w=$(writes)
		[ "${w:-0}" -gt $((w0 + 300)) ] && break
		usleep 100000
		i=$((i + 1))
	done
	$CTL inject nvme0 delay 50 > /dev/null
	usleep 200000
	kill -9 "$(cat $W/pid)"
	echo "killed nvmefsd @ $(cut -d' ' -f1 /proc/uptime)s"
) &
KP=$!
dmesg > $W/dmesg0
fio --name=kill --filename=$D --ioengine=libaio --direct=1 --iodepth=16 --bssplit=4k/50:16k/30:64k/20 \
	--rw=randwrite --size=32M --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --rate=,4m --randseed=7 \
	--output-format=json --output=/mnt/share/fio.json > $W/fio.err 2>&1
frc=$?
wait $KP
echo "fio exit $frc @ $(cut -d' ' -f1 /proc/uptime)s"
cat $W/fio.err
c "fio exited 0" [ $frc = 0 ]
t "the kill was adopted" ok "the kernel resends the requests" grep -E "adopting|resends" $LOG
t "the initiator's controller is live" ok "^live\$" cat $C/state
t "no reset, reconnect or I/O error on it meanwhile" fail "" sh -c "dmesg | tail -n +$(($(wc -l < $W/dmesg0) + 1)) | grep -E '$(basename $C)|$B' | grep -Ei 'reset|reconnect|error|timeout'"

echo "== tear down"
t "nvme disconnect" ok "disconnected 1 controller" nvme disconnect -n $NQN
t "nvmefs-export nvmet stop" ok "" $X nvmet stop nvme0n1
t "nothing left in configfs" ok "^$" sh -c "ls /sys/kernel/config/nvmet/subsystems /sys/kernel/config/nvmet/ports /sys/kernel/config/nvmet/hosts | grep -v ':\$'"
kill -TERM $SPID
wait $SPID
c "nvmefsd stopped with 0 (SIGTERM)" grep -q "fdstore: pid [0-9]* exited 0" $LOG
grep -E "exited|adopting|not adopting" $LOG
done_checks
