#!/bin/bash
# dma-isolation.sh - what controller isolation of DMA memory costs:
# [engine] dma_isolation = controller (a pool per controller on each
# reactor, mapped into that controller only) against shared (one pool per
# reactor, mapped into every controller), measured in one run.
#
#   bench/dma-isolation.sh [OUT]          (OUT: a directory for the fio outputs)
#
# nvmefsd over two software controllers (RAM namespaces of 256 MiB, exec =
# inline) served by one reactor (queues = 1, cpus = CPU), fuse_transport =
# TRANSPORT (classic), the two modes in alternating rounds, each round a
# fresh daemon.  fio, direct=1, libaio, one job per controller at once
# (group_reporting: the sum): 4 KiB randread and randwrite at QD32 each,
# 1 MiB sequential read and write at QD8 each.  Prints per job the medians
# of ROUNDS (3) runs of RUNTIME (5) seconds of each mode, the ratio of the
# medians controller/shared and the median of each round's ratio, and the
# memory the daemon had locked (VmLck: the DMA pools, rings and admin
# memory) in each mode.  The order of the two modes alternates by round.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BUILD:-$ROOT/build}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-3}
CPU=${CPU:-$(($(nproc) - 1))}
TRANSPORT=${TRANSPORT:-classic}
. "$HERE/fuse-lib.sh"
bench_outdir dmaiso "$@"
W=$(mktemp -d /tmp/nvmefs-dmaiso-w.XXXXXX)
trap 'stop_all; rm -rf "$W"' EXIT
MNT=$W/mnt
MODES="shared controller"
JOBS="4k-randread 4k-randwrite 1m-read 1m-write"

start() { # MODE
	cat > "$W/conf" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_mode = 0666
log_level = warn
fuse_transport = $TRANSPORT
[engine]
queues = 1
cpus = $CPU
mode = hybrid
queue_depth = 256
dma_isolation = $1
[controller nvme0]
device = sim
size = 256M
block_size = 4096
backing = ram
[controller nvme1]
device = sim
size = 256M
block_size = 4096
backing = ram
EOF
	"$BUILD/nvmefsd" -f -c "$W/conf" > "$W/log" 2>&1 &
	PIDS+=($!)
	MOUNTS+=("$MNT")
	wait_mount "$MNT" "$MNT/nvme1n1" "${PIDS[-1]}" 20 nvmefsd "$W/log" || { echo "$WHY" >&2; exit 1; }
	# fill once: first-touch page faults are not what is measured
	for n in nvme0n1 nvme1n1; do
		dd if=/dev/zero of="$MNT/$n" bs=1M count=256 oflag=direct conv=notrunc status=none
	done
	LCK=$(awk '/^VmLck/ { print $2 }' "/proc/${PIDS[-1]}/status")
}

job() { # NAME MODE -> IOPS (4k) or MiB/s (1m)
	local name=$1 mode=$2 args dir
	case $name in
	4k-randread) args="--rw=randread --bs=4k --iodepth=32" dir=read ;;
	4k-randwrite) args="--rw=randwrite --bs=4k --iodepth=32" dir=write ;;
	1m-read) args="--rw=read --bs=1M --iodepth=8" dir=read ;;
	1m-write) args="--rw=write --bs=1M --iodepth=8" dir=write ;;
	esac
	# shellcheck disable=SC2086
	fio --direct=1 --ioengine=libaio $args --size=256M --runtime="$RUNTIME" --time_based \
		--group_reporting --output-format=json --output="$OUT/$name-$mode-$R.json" \
		--name=c0 --filename="$MNT/nvme0n1" --name=c1 --filename="$MNT/nvme1n1" \
		> /dev/null 2>&1
	python3 - "$OUT/$name-$mode-$R.json" "$name" "$dir" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[3]]
print("%.1f" % (d["bw"] / 1024.0 if sys.argv[2].startswith("1m") else d["iops"]))
PY
}

declare -A V M L
for R in $(seq "$ROUNDS"); do
	# the order alternates too: neither mode always runs first
	order=$MODES
	[ $((R % 2)) = 0 ] && order=$(echo "$MODES" | awk '{ print $2, $1 }')
	for mode in $order; do
		start "$mode"
		L[$mode,$R]=$LCK
		for name in $JOBS; do
			V[$name,$mode,$R]=$(job "$name" "$mode")
		done
		stop_all
	done
done
med() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
printf '%-13s %10s %10s %17s %13s\n' job shared controller controller/shared round-ratio
for name in $JOBS; do
	for mode in $MODES; do
		vals=()
		for R in $(seq "$ROUNDS"); do vals+=("${V[$name,$mode,$R]}"); done
		M[$mode]=$(med "${vals[@]}")
	done
	# and the median of each round's ratio (the two runs next to each other)
	rr=()
	for R in $(seq "$ROUNDS"); do
		rr+=("$(echo "${V[$name,controller,$R]} / ${V[$name,shared,$R]}" | bc -l)")
	done
	printf '%-13s %10s %10s %17.3f %13.3f\n' "$name" "${M[shared]}" "${M[controller]}" \
		"$(echo "${M[controller]} / ${M[shared]}" | bc -l)" "$(med "${rr[@]}")"
done
for mode in $MODES; do
	vals=()
	for R in $(seq "$ROUNDS"); do vals+=("${L[$mode,$R]}"); done
	printf 'locked memory, %s: %s KiB (median)\n' "$mode" "$(med "${vals[@]}")"
done
echo "(4k: IOPS, 1m: MiB/s, both controllers summed; medians of $ROUNDS rounds of ${RUNTIME} s;"
echo " transport $TRANSPORT, one reactor on CPU $CPU; fio outputs in $OUT)"
