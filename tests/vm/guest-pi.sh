# guest-pi.sh - in the guest (busybox sh, host /usr shared for fio, dd, cmp,
# fallocate; the host's test folder shared at /mnt/share): nvmefsd over
# VFIO on QEMU's NVMe controller at $BDF with seven namespaces of different
# metadata and protection information formats (t-vfio-pi.sh lists them;
# /mnt/share/geometry says each one's LBA size, metadata size and blocks),
# in one boot:
#   - namespaces 1..6 are served and logged with their format, 7 (extended
#     metadata beyond its PI) is refused with the reason; each file's size is
#     QEMU's block count (the image holds data, then metadata);
#   - fio writes and verifies each served file (crc32c): no error, no
#     protection error counted; Write Zeroes (fallocate -z; fallocate -p is
#     Write Zeroes with DEAC) reads back as zeroes without error (not on 5,
#     where QEMU 7.2 writes a wrong guard);
#   - the host changes a byte of a block in an image file underneath the
#     running guest ("@@HOST n corrupt NSID LBA@@", acknowledged by creating
#     /mnt/share/ack-n): the read fails with EIO (guard check), for dd and
#     for fio (never a verify mismatch), its neighbour reads back intact;
#   - the host copies a block, data and metadata, over another ("@@HOST n
#     misplace NSID FROM TO@@"), as a misdirected write of the device:
#     Types 1 and 2 refuse it (reference tag check), Type 3 cannot tell;
#   - each refusal is counted (stats, metrics) and logged with its LBA;
#     SIGTERM is clean.
. /payload/check.sh
BDF=${BDF:-0000:00:01.0}
W=/tmp/pi
MNT=$W/mnt
CONF=$W/nvmefs.conf
LOG=$W/daemon.log
SHARE=/mnt/share
DD=/usr/bin/dd CMP=/usr/bin/cmp FALLOCATE=/usr/bin/fallocate
mkdir -p "$W"
ctl() { nvmefsctl -s $W/admin.sock "$@"; }
seq_n=0
# ask_host WORDS...: a request for the host, waited for (60 s)
ask_host() {
	seq_n=$((seq_n + 1))
	echo "@@HOST $seq_n $*@@"
	i=0
	while [ ! -e $SHARE/ack-$seq_n ] && [ $i -lt 600 ]; do usleep 100000; i=$((i + 1)); done
	[ -e $SHARE/ack-$seq_n ]
}
# prot: the protection errors counted (totals of stats --json; nvmefsctl
# prints one member a line, and awk starts faster than python3 over 9p)
prot() {
	ctl stats --json | awk -F: '/"totals": \{/ { t = 1 } t && /"protection"/ { v = $2 + 0; print v; exit }'
}
# geometry of namespace N: LBS MS NLB
geo() { awk -v n="$1" '$1 == n { print $2, $3, $4 }' $SHARE/geometry; }

cat > "$CONF" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_owner = 0
file_group = 0
log_level = info
[engine]
queues = 1
cpus = 1
queue_depth = 64
mode = poll
io_timeout_ms = 30000
[controller nvme0]
device = $BDF
EOF
nvmefsd -f -c "$CONF" > "$LOG" 2>&1 &
DPID=$!
i=0
while [ ! -f $MNT/nvme0n6 ] && [ $i -lt 600 ] && kill -0 $DPID 2>/dev/null; do usleep 100000; i=$((i + 1)); done
c "daemon up" [ -f $MNT/nvme0n6 ]
[ -f $MNT/nvme0n6 ] || { cat "$LOG"; done_checks; }
grep -E 'namespace [0-9]+:' "$LOG" | sed 's/^/    daemon: /'

echo "== formats served and refused"
c "1: Type 1, 16-bit guard, the metadata is the PI" grep -q 'nvme0: namespace 1: protection information Type 1, 16-bit guard, in the last 8 of 8 bytes of separate metadata' $LOG
c "2: Type 2, extended LBA of just the PI" grep -q 'nvme0: namespace 2: protection information Type 2, 16-bit guard, in the last 8 of 8 bytes of extended metadata' $LOG
c "3: Type 3, PI first of 16 bytes" grep -q 'nvme0: namespace 3: protection information Type 3, 16-bit guard, in the first 8 of 16 bytes of separate metadata: the controller inserts it and checks the guard$' $LOG
c "4: Type 1, 64-bit guard (ELBAF)" grep -q 'nvme0: namespace 4: protection information Type 1, 64-bit guard, in the last 16 of 16 bytes of separate metadata' $LOG
c "5: Type 2, 64-bit guard, last of 64 bytes" grep -q 'nvme0: namespace 5: protection information Type 2, 64-bit guard, in the last 16 of 64 bytes of separate metadata' $LOG
c "6: metadata without PI" grep -q 'nvme0: namespace 6: 8 bytes of separate metadata per block, no protection information' $LOG
c "7: refused, with the reason" grep -q 'nvme0: namespace 7: 16 bytes of metadata per block beyond its protection information, extended .*skipped' $LOG
c "7: no file" [ ! -e $MNT/nvme0n7 ]
for n in 1 2 3 4 5 6; do
	set -- $(geo $n)
	c "nvme0n$n: st_size is QEMU's $3 blocks of $1 bytes" [ "$(stat -c %s $MNT/nvme0n$n)" = $(($3 * $1)) ]
done

echo "== fio verify on each format"
# one fio, a job per file (fio loaded over 9p in an emulated guest takes
# seconds to start)
jobs=
for n in 1 2 3 4 5 6; do jobs="$jobs --name=n$n --filename=$MNT/nvme0n$n"; done
fio --direct=1 --ioengine=libaio --rw=randwrite --bsrange=4k-64k --iodepth=4 --size=2M \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --output-format=json \
	--output=$W/fio.json $jobs > $W/fio.err 2>&1
rc=$?
c "fio randwrite + crc32c verify on the six files, exit $rc" [ $rc = 0 ]
c "no mismatch" sh -c "! grep -Eqi 'verify (failed|error)|bad magic|crc32c: ' $W/fio.err"
# each job's error and bytes verified (fio's JSON: one member a line)
awk -F: '/"jobname"/ { j = $2; gsub(/[" ,]/, "", j) } /^ *"error" :/ { e[j] = $2 + 0 }
	END { for (k in e) print k, e[k] }' $W/fio.json > $W/fio.errors
for n in 1 2 3 4 5 6; do
	c "nvme0n$n: fio job ended without error ($(awk -v j=n$n '$1 == j { print $2 }' $W/fio.errors))" \
		[ "$(awk -v j=n$n '$1 == j { print $2 }' $W/fio.errors)" = 0 ]
done
c "no protection error after the fio runs ($(prot))" [ "$(prot)" = 0 ]

echo "== Write Zeroes and deallocation read back as zeroes"
# not on 5: QEMU 7.2's Write Zeroes stores a fixed 64-bit guard, that of a
# 4 KiB zero block alone, where the PI is last of 64 bytes (the guard must
# cover the 48 before it): the blocks are refused afterwards (EIO)
for n in 1 3 4; do
	F=$MNT/nvme0n$n
	t "nvme0n$n: zero range (Write Zeroes, PRACT)" ok "" $FALLOCATE -z -o 1M -l 256K $F
	t "nvme0n$n: punch hole (deallocate)" ok "" $FALLOCATE -p -o 2M -l 256K $F
	zeroes() { $DD if=$1 bs=256K skip=$2 count=1 iflag=direct status=none | $CMP -n 262144 - /dev/zero; }
	t "nvme0n$n: the zeroed range reads zeroes" ok "" zeroes $F 4
	t "nvme0n$n: the punched range reads zeroes" ok "" zeroes $F 8
done
c "no protection error after zeroing ($(prot))" [ "$(prot)" = 0 ]

# protection errors expected so far (not "want": check.sh's t() uses that name)
nprot=0
# block BS LBA PATTERN-BYTE into F: one direct write of that byte repeated
put() { head -c $2 /dev/zero | tr '\0' "\\$4" | $DD of=$1 bs=$2 seek=$3 count=1 oflag=direct conv=notrunc status=none; }
is() { $DD if=$1 bs=$2 skip=$3 count=1 iflag=direct status=none | $CMP -s -n $2 - $W/pat.$4.$2; }
for b in 512 4096; do
	for p in 132 145 167; do head -c $b /dev/zero | tr '\0' "\\$p" > $W/pat.$p.$b; done
done
eio() { # F BS LBA: the read fails with EIO
	$DD if=$1 of=$W/got bs=$2 skip=$3 count=1 iflag=direct 2> $W/dd.err
	r=$?
	cat $W/dd.err
	[ $r != 0 ] && grep -q "Input/output error" $W/dd.err
}

echo "== a block changed underneath, in the image file"
for n in 1 2 3 4 5; do
	set -- $(geo $n)
	bs=$1
	F=$MNT/nvme0n$n
	put $F $bs 9 132 && put $F $bs 10 132
	c "nvme0n$n: host changed a byte of block 10 in the image" ask_host corrupt $n 10
	t "nvme0n$n: its read fails with EIO" ok "" eio $F $bs 10
	nprot=$((nprot + 1))
	c "nvme0n$n: block 9 reads back intact" is $F $bs 9 132
	c "nvme0n$n: counted (protection errors $(prot), want $nprot)" [ "$(prot)" = $nprot ]
done
c "the guard error is logged with its LBA" grep -q 'read of namespace 1, LBA 10 + 1: end-to-end guard check error (status 0x282)' $LOG
# fio over it: EIO, not a verify mismatch
fio --name=v --filename=$MNT/nvme0n1 --direct=1 --ioengine=psync --rw=read --bs=4k --offset=36K \
	--size=8K --verify=pattern --verify_pattern=0x5a --verify_only=1 \
	--output-format=json --output=$W/fe.json > $W/fe.err 2>&1
ferr=$(awk -F: '/^ *"error" :/ { print $2 + 0; exit }' $W/fe.json)
c "fio's read of the changed block ends with EIO (error $ferr), no mismatch" \
	sh -c "[ '$ferr' = 5 ] && ! grep -Eqi 'verify (failed|error)|bad magic|pattern: ' $W/fe.err"
nprot=$((nprot + 1))
c "counted (protection errors $(prot), want $nprot)" [ "$(prot)" = $nprot ]

echo "== a block misplaced underneath (data and metadata copied over another)"
for n in 1 2 3 4 5; do
	set -- $(geo $n)
	bs=$1
	F=$MNT/nvme0n$n
	put $F $bs 20 145 && put $F $bs 40 167
	c "nvme0n$n: host copied block 20 over block 40 in the image" ask_host misplace $n 20 40
	if [ $n = 3 ]; then
		# Type 3 carries no reference tag: a whole misplaced block passes
		c "nvme0n$n: Type 3 cannot tell: block 40 reads as block 20's data" is $F $bs 40 145
		continue
	fi
	t "nvme0n$n: its read fails with EIO (reference tag)" ok "" eio $F $bs 40
	nprot=$((nprot + 1))
	c "nvme0n$n: block 20 reads back intact" is $F $bs 20 145
	c "nvme0n$n: counted (protection errors $(prot), want $nprot)" [ "$(prot)" = $nprot ]
done
c "the reference tag error is logged with its LBA" grep -q 'read of namespace 4, LBA 40 + 1: end-to-end reference tag check error (status 0x284)' $LOG
m=$(ctl metrics | awk 'index($1, "nvmefs_qpair_errors_total{") == 1 && index($1, "class=\"protection\"") { s += $2 } END { print s + 0 }')
c "the metrics count them ($m)" [ "$m" = $nprot ]

kill -TERM $DPID
wait $DPID
rc=$?
c "SIGTERM: exit 0 (got $rc)" [ $rc = 0 ]
done_checks
