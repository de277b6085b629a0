#!/bin/bash
# export.sh - what serving a namespace file to another host costs, against
# using it locally, in one run.  On the host: nvmefsd (software controller,
# one RAM namespace, /dev/fuse) and fio on
#   local         the namespace file (libaio, O_DIRECT)
#   qemu-unix     qemu-storage-daemon's NBD export on a UNIX socket
#   qemu-tcp      the same on TCP 127.0.0.1
#   nbdkit-unix   nbdkit's file plugin on a UNIX socket
#   nbdkit-tcp    the same on TCP 127.0.0.1
# (the NBD ones through fio's nbd engine, libnbd; each export made by
# scripts/nvmefs-export as its unit would), with the jobs
#   randread4k-qd32, randwrite4k-qd32, read1m-qd4, write1m-qd4,
#   randread4k-qd1, randwrite4k-qd1
# ROUNDS rounds, the paths' order reversed every other round; the report has
# each job's median IOPS, MB/s and mean/p99 latency per path and remote ÷
# local.  Then one `perf record -g` of fio, nvmefsd and the server per path
# during randread4k-qd32 (PERF_SECONDS), summarised by process and symbol.
# With -g, the NVMe/TCP side instead: a guest (tests/vm, Debian's 6.12
# kernel) where nvmet exports the namespace file on 127.0.0.1:4420 and the
# same jobs run on the file and on the initiator's /dev/nvmeXnY, alternating
# (emulated under TCG: only the ratios mean anything).
#
# Usage: bench/export.sh [-o FILE] [-b BUILD] [-g]
# Environment: RUNTIME (5 s per job), RAMP (1), ROUNDS (3), PERF_SECONDS (4),
#   SIZE (512M), GROUNDS (2, guest rounds), GRUNTIME (3, guest seconds per job)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNTIME=${RUNTIME:-5}
RAMP=${RAMP:-1}
ROUNDS=${ROUNDS:-3}
PERF_SECONDS=${PERF_SECONDS:-4}
SIZE=${SIZE:-512M}
BUILDDIR=${BUILD:-$ROOT/build}
OUT=
GUEST=0
while getopts "o:b:g" o; do
	case $o in
	o) OUT=$OPTARG ;;
	b) BUILDDIR=$OPTARG ;;
	g) GUEST=1 ;;
	*) sed -n '2,25p' "$0"; exit 2 ;;
	esac
done
case "$BUILDDIR" in /*) ;; *) BUILDDIR=$ROOT/$BUILDDIR ;; esac
JOBS="randread4k-qd32 randwrite4k-qd32 read1m-qd4 write1m-qd4 randread4k-qd1 randwrite4k-qd1"

# job_args JOB: fio's arguments for it
job_args() {
	case $1 in
	randread4k-qd32) echo "--rw=randread --bs=4k --iodepth=32" ;;
	randwrite4k-qd32) echo "--rw=randwrite --bs=4k --iodepth=32" ;;
	read1m-qd4) echo "--rw=read --bs=1m --iodepth=4" ;;
	write1m-qd4) echo "--rw=write --bs=1m --iodepth=4" ;;
	randread4k-qd1) echo "--rw=randread --bs=4k --iodepth=1" ;;
	randwrite4k-qd1) echo "--rw=randwrite --bs=4k --iodepth=1" ;;
	esac
}

W=$(mktemp -d /tmp/nvmefs-bench-export.XXXXXX)
chmod 755 "$W"
R=$W/results
mkdir -p "$R"

# summarise: the report from $R/PATH.JOB.ROUND.json files (python)
summarise() {
	python3 - "$R" "$1" <<'PY'
import json, os, sys, statistics, collections
d, paths = sys.argv[1], sys.argv[2].split()
jobs = "randread4k-qd32 randwrite4k-qd32 read1m-qd4 write1m-qd4 randread4k-qd1 randwrite4k-qd1".split()
res = collections.defaultdict(list)
for f in os.listdir(d):
    if not f.endswith(".json"):
        continue
    p, j, r = f[:-5].split(".")
    t = open(os.path.join(d, f)).read()
    try:
        x = json.loads(t[t.index("{"):])["jobs"][0]
    except Exception:
        continue
    k = x["read"] if x["read"]["io_bytes"] else x["write"]
    res[(p, j)].append((int(r), k["iops"], k["bw_bytes"] / 1e6, k["clat_ns"]["mean"] / 1e3,
                        k["clat_ns"]["percentile"]["99.000000"] / 1e3, x["error"]))
med = {}
print("| job | path | IOPS | MB/s | mean lat (us) | p99 (us) | remote ÷ local (IOPS) | per round |")
print("|---|---|---|---|---|---|---|---|")
for j in jobs:
    for p in paths:
        v = res.get((p, j))
        if not v:
            continue
        iops = statistics.median(a[1] for a in v)
        med[(p, j)] = iops
        rounds = sorted(v)
        loc = {a[0]: a[1] for a in res.get((paths[0], j), [])}
        per = " ".join("%.2f" % (a[1] / loc[a[0]]) for a in rounds if loc.get(a[0]))
        ratio = "" if p == paths[0] else "%.2f" % statistics.median(
            a[1] / loc[a[0]] for a in rounds if loc.get(a[0])) if loc else ""
        print("| %s | %s | %.0f | %.1f | %.0f | %.0f | %s | %s |" % (
            j, p, iops, statistics.median(a[2] for a in v), statistics.median(a[3] for a in v),
            statistics.median(a[4] for a in v), ratio, "" if p == paths[0] else per))
        if any(a[5] for a in v):
            print("| | | (fio reported errors) | | | | | |")
PY
}

if [ $GUEST = 1 ]; then
	# ---------------------------------------------------------- guest
	GROUNDS=${GROUNDS:-2}
	GRUNTIME=${GRUNTIME:-3}
	VMH=$ROOT/tests/vm
	export BUILD=$BUILDDIR
	VM_KERNEL_PKG=${VM_KERNEL_PKG:-$(apt-cache pkgnames linux-image-6.12 2>/dev/null |
		grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | sort -V | tail -n 1)}
	export VM_KERNEL_PKG NVMEFS_VM_DIR=${NVMEFS_VM_DIR:-$BUILDDIR/vm-6.12}
	# shellcheck source=/dev/null
	. "$VMH/lib.sh"
	VM_HERE=$VMH # (lib.sh took this script's folder for tests/vm)
	vm_prepare
	DIR=$W/payload
	mkdir -p "$DIR" "$W/share"
	cp "$BUILDDIR/nvmefsd" "$BUILDDIR/nvmefsctl" "$ROOT/scripts/nvmefs-export" "$DIR/"
	# one fio job file: every job on each path, GROUNDS rounds, the order
	# of the paths reversed every other round (one fio start: over 9p it
	# takes seconds)
	{
		echo "[global]"
		echo "ioengine=libaio"
		echo "direct=1"
		echo "time_based=1"
		echo "runtime=$GRUNTIME"
		echo "ramp_time=1"
		echo "size=256M"
		echo "group_reporting=1"
		r=1
		while [ $r -le "$GROUNDS" ]; do
			order="local nvmet"
			[ $((r % 2)) = 0 ] && order="nvmet local"
			for j in $JOBS; do
				for p in $order; do
					f='${LOCALFILE}'
					[ $p = nvmet ] && f='${NVMETDEV}'
					echo "[$p.$j.$r]"
					echo "stonewall"
					echo "filename=$f"
					job_args $j | tr ' ' '\n' | sed 's/^--//'
				done
			done
			r=$((r + 1))
		done
	} > "$DIR/jobs.fio"
	cat > "$DIR/cmd.sh" <<'GUEST_EOF'
P=/payload/payload
W=/run/nvx
ip link set lo up
grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs configfs /sys/kernel/config
mkdir -p -m 0700 $W
cat > $W/nvmefs.conf <<EOF
[daemon]
mountpoint = $W/mnt
admin_socket = $W/admin.sock
file_owner = 0
file_group = 0
fuse_transport = classic
[controller nvme0]
device = sim
size = 256M
block_size = 4096
backing = ram
EOF
$P/nvmefsd -f -c $W/nvmefs.conf > $W/daemon.log 2>&1 &
i=0; while [ ! -e $W/mnt/nvme0n1 ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
mkdir -p /etc/nvmefs/export
printf 'FILE=%s\nNQN=nqn.2014-08.io.nvmefs.bench:nvme0n1\nALLOW_ANY_HOST=yes\n' $W/mnt/nvme0n1 > /etc/nvmefs/export/b.conf
sh $P/nvmefs-export nvmet start b || exit 1
ls /dev/nvme*n* > $W/before
nvme connect -t tcp -a 127.0.0.1 -s 4420 -n nqn.2014-08.io.nvmefs.bench:nvme0n1 \
	--hostnqn=nqn.2014-08.io.nvmefs.bench:h --hostid=$(cat /proc/sys/kernel/random/uuid) || exit 1
sleep 1
D=$(ls /dev/nvme*n* | grep -vxF -f $W/before | head -n 1)
echo "bench: local $W/mnt/nvme0n1, NVMe/TCP $D; guest CPUs $(nproc)"
LOCALFILE=$W/mnt/nvme0n1 NVMETDEV=$D fio --output-format=json --output=/mnt/share/guest.json $P/jobs.fio
echo "fio exit $?"
nvme disconnect -n nqn.2014-08.io.nvmefs.bench:nvme0n1 > /dev/null
sh $P/nvmefs-export nvmet stop b
kill $(pidof nvmefsd)
GUEST_EOF
	echo "booting the guest ($VM_KERNEL_PKG; $(uptime))"
	vm_run "$W/guest.log" -M none -U -m 1G -c 2 -t 900 -s "$W/share" -p "$DIR" -f "$DIR/cmd.sh" ||
		{ echo "the guest failed"; exit 1; }
	python3 - "$W/share/guest.json" "$R" <<'PY'
import json, sys, os
t = open(sys.argv[1]).read()
d = json.loads(t[t.index("{"):])
for j in d["jobs"]:
    p, job, r = j["jobname"].split(".")
    json.dump({"jobs": [j]}, open(os.path.join(sys.argv[2], "%s.%s.%s.json" % (p, job, r)), "w"))
PY
	{
		echo "NVMe/TCP in the guest ($VM_KERNEL_PKG, TCG, 2 vCPUs): nvmet on the namespace file, initiator in the same guest, against fio on the file; $GROUNDS rounds of ${GRUNTIME} s per job"
		echo "host load before: $(uptime)"
		summarise "local nvmet"
	} | tee "$W/report"
	[ -n "$OUT" ] && cp "$W/report" "$OUT"
	rm -rf "$W"
	exit 0
fi

# -------------------------------------------------------------- host
for t in fio qemu-storage-daemon nbdkit perf python3; do
	command -v $t >/dev/null || { echo "$t missing"; exit 1; }
done
MNT=$W/mnt
cat > "$W/nvmefs.conf" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_owner = 0
file_group = 0
fuse_transport = classic
[controller nvme0]
device = sim
size = $SIZE
block_size = 4096
backing = ram
EOF
DPID= EPID=
cleanup() {
	[ -n "$EPID" ] && kill "$EPID" 2>/dev/null
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	umount -l "$MNT" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
"$BUILDDIR/nvmefsd" -f -c "$W/nvmefs.conf" > "$W/daemon.log" 2>&1 &
DPID=$!
i=0
while [ ! -f "$MNT/nvme0n1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$MNT/nvme0n1" ] || { cat "$W/daemon.log"; exit 1; }
# fill it, so reads read data
dd if=/dev/urandom of="$MNT/nvme0n1" bs=1M count=${SIZE%M} oflag=direct conv=notrunc status=none
export NVMEFS_EXPORT_RUNDIR=$W/run NVMEFS_EXPORT_CONFDIR=$W/export
mkdir -p "$NVMEFS_EXPORT_CONFDIR"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# start PATH: its export (EPID, URI); local has none
start() {
	EPID= URI=
	case $1 in
	local) return 0 ;;
	qemu-*) e=qemu ;;
	nbdkit-*) e=nbdkit ;;
	esac
	case $1 in
	*-unix) l=unix:$NVMEFS_EXPORT_RUNDIR/$1.sock URI="nbd+unix:///$1?socket=$NVMEFS_EXPORT_RUNDIR/$1.sock" ;;
	*-tcp) l=tcp:127.0.0.1:$PORT URI="nbd://127.0.0.1:$PORT/$1" ;;
	esac
	printf 'FILE=%s\nENGINE=%s\nLISTEN=%s\n' "$MNT/nvme0n1" $e "$l" > "$NVMEFS_EXPORT_CONFDIR/$1.conf"
	"$ROOT/scripts/nvmefs-export" nbd "$1" || exit 1
	EPID=$(cat "$NVMEFS_EXPORT_RUNDIR/$1.pid")
}
stop() {
	[ -n "$EPID" ] || return 0
	kill "$EPID"
	while kill -0 "$EPID" 2>/dev/null; do sleep 0.1; done
	EPID=
}
# fio_run PATH JOB OUT [extra fio args]
fio_run() {
	p=$1 j=$2 o=$3
	shift 3
	if [ "$p" = local ]; then
		tgt=(--ioengine=libaio --direct=1 --filename="$MNT/nvme0n1")
	else
		tgt=(--ioengine=nbd --uri="$URI")
	fi
	# shellcheck disable=SC2046
	fio --name="$j" "${tgt[@]}" $(job_args "$j") --size="$SIZE" --time_based --runtime="$RUNTIME" \
		--ramp_time="$RAMP" --output-format=json --output="$o" "$@" > /dev/null 2>&1
}

PATHS="local qemu-unix qemu-tcp nbdkit-unix nbdkit-tcp"
REV="nbdkit-tcp nbdkit-unix qemu-tcp qemu-unix local"
LOAD0=$(uptime)
echo "host: $(nproc) CPUs; $LOAD0"
r=1
while [ $r -le "$ROUNDS" ]; do
	order=$PATHS
	[ $((r % 2)) = 0 ] && order=$REV
	for p in $order; do
		start "$p"
		for j in $JOBS; do
			fio_run "$p" "$j" "$R/$p.$j.$r.json"
		done
		stop
	done
	echo "round $r done ($(uptime))"
	r=$((r + 1))
done
LOAD1=$(uptime)

# one profile per remote path, during randread4k-qd32
PROF=$W/profiles
mkdir -p "$PROF"
for p in local qemu-unix qemu-tcp nbdkit-unix nbdkit-tcp; do
	start "$p"
	fio_run "$p" randread4k-qd32 "$PROF/$p.json" --runtime=$((PERF_SECONDS + 2)) &
	FP=$!
	sleep 1
	# the processes on the path only (fio, nvmefsd, the server): on a
	# shared machine a system-wide profile is mostly other people's work
	pids=$(pgrep -P "$FP" -x fio | tr '\n' ,)$DPID${EPID:+,$EPID}
	perf record -g -F 999 -p "$pids" -o "$PROF/$p.data" -- sleep "$PERF_SECONDS" > /dev/null 2>&1
	wait $FP
	stop
	{
		echo "### $p: samples by process (perf record -g -p fio,nvmefsd,server; randread4k-qd32, ${PERF_SECONDS} s; $(python3 -c 'import json,sys; t=open(sys.argv[1]).read(); print("%.0f IOPS" % json.loads(t[t.index("{"):])["jobs"][0]["read"]["iops"])' "$PROF/$p.json" 2>/dev/null))"
		perf report -i "$PROF/$p.data" --no-children --sort comm --stdio -q -g none 2>/dev/null |
			grep -v '^$' | head -n 8
		echo "### $p: top symbols (self)"
		perf report -i "$PROF/$p.data" --no-children --sort comm,sym --stdio -q -g none 2>/dev/null |
			grep -v '^$' | head -n 25
		echo "### $p: copies and wake-ups (self, all processes)"
		perf report -i "$PROF/$p.data" --no-children --sort sym --stdio -q -g none 2>/dev/null |
			grep -Ei 'copy_user|memcpy|memmove|copy_page|_copy_to_iter|_copy_from_iter|try_to_wake_up|futex|schedule\b|__schedule|do_idle|poll_idle|mwait|native_safe_halt|pv_native_safe_halt|default_idle' |
			head -n 14
	} > "$PROF/$p.txt"
done

{
	echo "NBD on the host: nvmefsd (sim, RAM namespace of $SIZE, /dev/fuse, hybrid) and fio; $ROUNDS rounds, ${RUNTIME} s per job after ${RAMP} s"
	echo "load before: $LOAD0"
	echo "load after:  $LOAD1"
	echo
	summarise "$PATHS"
	echo
	for p in local qemu-unix qemu-tcp nbdkit-unix nbdkit-tcp; do
		cat "$PROF/$p.txt"
		echo
	done
} | tee "$W/report"
[ -n "$OUT" ] && cp "$W/report" "$OUT"
exit 0
