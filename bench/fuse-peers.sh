#!/bin/bash
# fuse-peers.sh - the same fio jobs, in one run, against files served through
# FUSE by different servers:
#   ceiling   fuse-null -p: replies at once, stores nothing, polls the channel
#             (the transport's limit)
#   null-epoll  the same server sleeping in epoll between requests
#   nvmefs    nvmefsd on its software controller, one 1 GiB RAM namespace
#   qsd       qemu-storage-daemon FUSE export of a raw 1 GiB image in /dev/shm
#   nbd       nbdkit memory plugin (1 GiB) behind nbdfuse
# and prints one table: IOPS, MiB/s, mean and p99 latency, and each result's
# ratio to the ceiling.  The machine is shared and noisy; the ratios within
# one run are what count, not the absolute numbers.
#
# Usage: bench/fuse-peers.sh [-r SECONDS] [-o FILE] [-b BUILD] [-q "1 2"]
#                            [-m MODE] [-t "ceiling null-epoll nvmefs qsd nbd"]
#   -r  seconds per fio job, after a 2 s ramp (default 10)
#   -o  also write the table to FILE
#   -b  build directory holding tools/fuse-null and nvmefsd
#       (default: $BUILD, else build/ in the repository)
#   -q  nvmefs queue counts to run, one target each (default "1")
#   -m  nvmefs engine mode: poll, interrupt or hybrid (default hybrid)
#   -t  targets to run (default all four)
# Installs nothing: it says what is missing (scripts/deps.sh bench installs
# the peers).  NVMEFSD=PATH runs that daemon instead of BUILD/nvmefsd.
# Every mount and process it starts is removed on exit.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNTIME=10
RAMP=2
OUT=
BUILDDIR=${BUILD:-$ROOT/build}
QUEUES="1"
MODE=hybrid
TARGETS="ceiling null-epoll nvmefs qsd nbd"
SIZE=1G

# bench_getopts and the checks, is_mounted, unmount, stop_pid, stop_all,
# wait_mount, logtail
. "$ROOT/bench/fuse-lib.sh"
bench_opt() { # -r SECONDS, -q QUEUES, -m MODE, -t TARGETS
	case $1 in
	r) RUNTIME=$2 ;;
	q) QUEUES=$2 ;;
	m) MODE=$2 ;;
	t) TARGETS=$2 ;;
	*) return 1 ;;
	esac
}
bench_getopts "r:q:m:t:" "$@"
check_num -r "$RUNTIME"
check_mode -m "$MODE"
for q in $QUEUES; do check_num -q "$q"; done
# shellcheck disable=SC2086
check_among -t "ceiling null-epoll nvmefs qsd nbd" $TARGETS
NVMEFSD=${NVMEFSD:-$BUILDDIR/nvmefsd}

# ---- what is there ----
have() { command -v "$1" >/dev/null 2>&1; }
bench_need fio python3

# name|rw|bs|iodepth|numjobs
JOBS=(
	"4K randread QD1|randread|4k|1|1"
	"4K randread QD32x2|randread|4k|32|2"
	"4K randwrite QD32x2|randwrite|4k|32|2"
	"1M read QD8|read|1M|8|1"
	"1M write QD8|write|1M|8|1"
)

# expand the nvmefs target into one per queue count
LIST=
for t in $TARGETS; do
	if [ "$t" = nvmefs ]; then
		for q in $QUEUES; do LIST="$LIST nvmefs-q$q"; done
	else
		LIST="$LIST $t"
	fi
done

# say up front what will be missing
for t in $LIST; do
	case $t in
	ceiling | null-epoll) [ -x "$BUILDDIR/tools/fuse-null" ] || echo "fuse-peers: missing $BUILDDIR/tools/fuse-null" >&2 ;;
	nvmefs-q*) [ -x "$NVMEFSD" ] || echo "fuse-peers: missing $NVMEFSD (its rows: not available)" >&2 ;;
	qsd) have qemu-storage-daemon || echo "fuse-peers: missing qemu-storage-daemon (package qemu-system-common; scripts/deps.sh bench)" >&2 ;;
	nbd) have nbdkit && have nbdfuse || echo "fuse-peers: missing nbdkit or nbdfuse (packages nbdkit, libnbd-bin; scripts/deps.sh bench)" >&2 ;;
	esac
done

ntargets=$(echo "$LIST" | wc -w)
est=$((ntargets * ${#JOBS[@]} * (RUNTIME + RAMP + 1) + ntargets * 3))
bench_estimate $est "$ntargets targets x ${#JOBS[@]} jobs x (${RUNTIME} s + ${RAMP} s ramp)"

# ---- bookkeeping, cleanup ----
bench_work
SHM=
FIOPID=
STOP_SECONDS=5

cleanup() {
	if [ -n "$FIOPID" ]; then stop_pid "$FIOPID"; fi
	stop_all
	if [ -n "$SHM" ]; then rm -f "$SHM"; fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

unavailable() {
	local t=$1 why=$2 j
	echo "$t: not available ($why)" >&2
	for j in "${JOBS[@]}"; do
		printf '%s\t%s\tNA\t%s\n' "$t" "${j%%|*}" "$why" >>"$RES"
	done
}

# ---- the targets: each start_* sets FILE or returns non-zero with WHY ----
start_ceiling() { # [-p]
	local bin=$BUILDDIR/tools/fuse-null mnt=$WORK/null log=$WORK/fuse-null.log
	if [ ! -x "$bin" ]; then
		WHY="no $bin; build it with: make B=$(basename "$BUILDDIR") $(basename "$BUILDDIR")/tools/fuse-null"
		return 1
	fi
	mkdir -p "$mnt"
	"$bin" "$@" -s "$SIZE" "$mnt" </dev/null >"$log" 2>&1 &
	PIDS+=($!)
	MOUNTS+=("$mnt")
	FILE=$mnt/null
	wait_mount "$mnt" "$FILE" $! 10 fuse-null "$log"
}

start_nvmefs() {
	local q=$1
	local bin=$NVMEFSD mnt=$WORK/nvmefs-q$q conf=$WORK/nvmefs-q$q.conf
	local log=$WORK/nvmefs-q$q.log
	[ -x "$bin" ] || { WHY="no $bin"; return 1; }
	mkdir -p "$mnt"
	cat >"$conf" <<-EOF
	[daemon]
	mountpoint = $mnt
	admin_socket = $WORK/nvmefsd-q$q.sock
	file_mode = 0666
	file_owner = $(id -u)
	file_group = $(id -g)
	allow_other = no
	log_level = warn

	[engine]
	queues = $q
	mode = $MODE

	[controller nvme0]
	device = sim
	namespaces = 1
	size = $SIZE
	block_size = 4096
	backing = ram
	exec = inline
	EOF
	"$bin" -f -c "$conf" </dev/null >"$log" 2>&1 &
	PIDS+=($!)
	MOUNTS+=("$mnt")
	FILE=$mnt/nvme0n1
	wait_mount "$mnt" "$FILE" $! 10 nvmefsd "$log"
}

start_qsd() {
	local file=$WORK/qsd.img log=$WORK/qsd.log
	have qemu-storage-daemon || { WHY="qemu-storage-daemon missing: package qemu-system-common (scripts/deps.sh bench)"; return 1; }
	SHM=$(mktemp /dev/shm/fuse-peers.XXXXXX.img) || { WHY="cannot create an image in /dev/shm"; return 1; }
	truncate -s "$SIZE" "$SHM"
	: >"$file"
	qemu-storage-daemon \
		--blockdev file,node-name=f,filename="$SHM" \
		--blockdev raw,node-name=r,file=f \
		--export fuse,id=e,node-name=r,mountpoint="$file",writable=on \
		</dev/null >"$log" 2>&1 &
	PIDS+=($!)
	MOUNTS+=("$file")
	FILE=$file
	wait_mount "$file" "$file" $! 10 qemu-storage-daemon "$log"
}

start_nbd() {
	local sock=$WORK/nbd.sock mnt=$WORK/nbd n
	have nbdkit || { WHY="nbdkit missing: package nbdkit (scripts/deps.sh bench)"; return 1; }
	have nbdfuse || { WHY="nbdfuse missing: package libnbd-bin (scripts/deps.sh bench)"; return 1; }
	nbdkit -f -U "$sock" memory "$SIZE" </dev/null >"$WORK/nbdkit.log" 2>&1 &
	PIDS+=($!)
	for n in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
	[ -S "$sock" ] || { WHY="nbdkit did not listen"; logtail "$WORK/nbdkit.log"; return 1; }
	mkdir -p "$mnt"
	nbdfuse "$mnt" --unix "$sock" </dev/null >"$WORK/nbdfuse.log" 2>&1 &
	PIDS+=($!)
	MOUNTS+=("$mnt")
	FILE=$mnt/nbd
	wait_mount "$mnt" "$FILE" $! 10 nbdfuse "$WORK/nbdfuse.log"
}

# run_job TARGET "name|rw|bs|qd|jobs": one fio run, one result line
run_job() {
	local name rw bs qd nj
	IFS='|' read -r name rw bs qd nj <<<"$2"
	fio_job "$1" "$FILE" "$name" libaio "$rw" "$bs" "$qd" "$nj"
}

# ---- the run ----
START=$(date -u '+%Y-%m-%d %H:%M UTC')
for t in $LIST; do
	FILE=
	WHY=
	case $t in
	ceiling) start_ceiling -p ;;
	null-epoll) start_ceiling ;;
	nvmefs-q*) start_nvmefs "${t#nvmefs-q}" ;;
	qsd) start_qsd ;;
	nbd) start_nbd ;;
	esac
	if [ $? -ne 0 ]; then
		unavailable "$t" "$WHY"
		stop_all
		continue
	fi
	echo "$t: $FILE" >&2
	for j in "${JOBS[@]}"; do
		run_job "$t" "$j"
	done
	stop_all
done

# ---- the table ----
TABLE=$WORK/table.md
python3 - "$RES" >"$TABLE" <<-'EOF'
import sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
ceil = {r[1]: r for r in rows if r[0] == 'ceiling' and r[2] != 'NA'}
print('| target | job | IOPS | MiB/s | mean lat (us) | p99 lat (us) | vs ceiling |')
print('|---|---|---:|---:|---:|---:|---|')
for r in rows:
    t, job = r[0], r[1]
    if r[2] == 'NA':
        label = 'nvmefs' if t.startswith('nvmefs') else t
        print(f'| {t} | {job} | {label}: not available | | | | {r[3]} |')
        continue
    iops, mibs, lat, p99 = float(r[2]), float(r[3]), float(r[4]), float(r[5])
    c = ceil.get(job)
    if t == 'ceiling':
        ratio = '1'
    elif not c:
        ratio = '-'
    else:
        # 4K jobs compare IOPS, 1M jobs bandwidth; QD1 also latency
        if job.startswith('1M'):
            ratio = f'{mibs / float(c[3]):.2f} of bandwidth' if float(c[3]) else '-'
        else:
            ratio = f'{iops / float(c[2]):.2f} of IOPS' if float(c[2]) else '-'
        if 'QD1' in job.split() and lat:
            ratio += f', latency {lat / float(c[4]):.1f}x'
    print(f'| {t} | {job} | {iops:.0f} | {mibs:.1f} | {lat:.1f} | {p99:.1f} | {ratio} |')
EOF

{
	echo "fuse-peers: $START, $(uname -sr), $(nproc) CPUs, $(fio --version)," \
		"${RUNTIME} s per job after ${RAMP} s ramp, libaio direct=1, nvmefs mode $MODE"
	echo
	cat "$TABLE"
} >"$WORK/report"
cat "$WORK/report"
if [ -n "$OUT" ]; then
	cp "$WORK/report" "$OUT" || { echo "fuse-peers: cannot write $OUT" >&2; exit 1; }
fi
exit 0
