#!/bin/bash
# dsync.sh - what an O_DSYNC write costs, and FUA against a Flush after the
# write, measured in one run.
#
#   bench/dsync.sh [OUT]          (OUT: a directory for the fio outputs)
#
# nvmefsd over its software controller (exec = thread, a volatile write cache)
# with a file backing in /var/tmp (where a Flush or a FUA write is an
# fdatasync of the file) and a RAM backing (where both only update the
# power-loss model), each served three ways in alternating rounds:
#   plain   writes without O_DSYNC (what the cache gives)
#   fua     O_DSYNC writes, every command with FUA (the default)
#   flush   O_DSYNC writes answered after a Flush (NVMEFS_DSYNC_FUA_MAX=1)
# fio, direct=1: 4 KiB randwrite at QD1 (psync) and QD16 (libaio), and
# 1 MiB sequential writes at QD4 (two commands each at the controller's
# 512 KiB transfer limit).  Prints medians of ROUNDS (3) runs of RUNTIME (5)
# seconds and the ratios fua/plain and flush/fua.  BACKINGS ("file ram")
# picks the backings.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BUILD:-$ROOT/build}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-3}
. "$HERE/fuse-lib.sh"
bench_outdir dsync "$@"
trap 'stop_all' EXIT
W=$(mktemp -d /var/tmp/nvmefs-dsync.XXXXXX)
trap 'stop_all; rm -rf "$W"' EXIT
MNT=$W/mnt

start() { # BACKING MODE
	local backing=$1 mode=$2 fua=0
	[ "$mode" = flush ] && fua=1
	cat > "$W/conf" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_mode = 0666
log_level = warn
fuse_transport = classic
[engine]
queues = 1
cpus = 0
mode = hybrid
queue_depth = 64
[controller nvme0]
device = sim
size = 256M
block_size = 4096
backing = $backing
exec = thread
EOF
	if [ "$fua" = 1 ]; then
		NVMEFS_DSYNC_FUA_MAX=1 "$BUILD/nvmefsd" -f -c "$W/conf" > "$W/log" 2>&1 &
	else
		"$BUILD/nvmefsd" -f -c "$W/conf" > "$W/log" 2>&1 &
	fi
	PIDS+=($!)
	MOUNTS+=("$MNT")
	wait_mount "$MNT" "$MNT/nvme0n1" "${PIDS[-1]}" 20 nvmefsd "$W/log" || { echo "$WHY" >&2; exit 1; }
	# fill once: first-touch page faults are not what is measured
	dd if=/dev/zero of="$MNT/nvme0n1" bs=1M count=256 oflag=direct conv=notrunc status=none
}

job() { # NAME MODE -> IOPS (4k) or MiB/s (1m)
	local name=$1 mode=$2 sync=0 args
	[ "$mode" = plain ] || sync=1
	case $name in
	4k-qd1) args="--rw=randwrite --bs=4k --ioengine=psync --iodepth=1" ;;
	4k-qd16) args="--rw=randwrite --bs=4k --ioengine=libaio --iodepth=16" ;;
	1m-qd4) args="--rw=write --bs=1M --ioengine=libaio --iodepth=4" ;;
	esac
	# shellcheck disable=SC2086
	fio --name=d --filename="$MNT/nvme0n1" --direct=1 --sync=$sync $args --size=256M \
		--runtime="$RUNTIME" --time_based --output-format=json \
		--output="$OUT/$BK-$name-$mode-$R.json" > /dev/null 2>&1
	python3 - "$OUT/$BK-$name-$mode-$R.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["jobs"][0]["write"]
print("%.1f" % (d["bw"] / 1024.0 if sys.argv[2].startswith("1m") else d["iops"]))
PY
}

declare -A V M
for BK in ${BACKINGS:-file ram}; do
	case $BK in file) backing="$W/%c-%n.img" ;; ram) backing=ram ;; esac
	for R in $(seq "$ROUNDS"); do
		for mode in plain fua flush; do
			start "$backing" "$mode"
			for name in 4k-qd1 4k-qd16 1m-qd4; do
				V[$BK,$name,$mode,$R]=$(job "$name" "$mode")
			done
			stop_all
			rm -f "$W"/*.img
		done
	done
done
med() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
printf '%-5s %-8s %10s %10s %10s %9s %9s\n' backing job plain fua flush fua/plain flush/fua
for BK in ${BACKINGS:-file ram}; do
	for name in 4k-qd1 4k-qd16 1m-qd4; do
		for mode in plain fua flush; do
			vals=()
			for R in $(seq "$ROUNDS"); do vals+=("${V[$BK,$name,$mode,$R]}"); done
			M[$mode]=$(med "${vals[@]}")
		done
		printf '%-5s %-8s %10s %10s %10s %9.2f %9.2f\n' "$BK" "$name" "${M[plain]}" "${M[fua]}" \
			"${M[flush]}" "$(echo "${M[fua]} / ${M[plain]}" | bc -l)" \
			"$(echo "${M[flush]} / ${M[fua]}" | bc -l)"
	done
done
echo "(4k: IOPS, 1m: MiB/s; medians of $ROUNDS rounds of ${RUNTIME} s; fio outputs in $OUT)"
