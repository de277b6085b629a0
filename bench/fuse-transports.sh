#!/bin/bash
# fuse-transports.sh - the two FUSE channel transports, /dev/fuse ("classic")
# and FUSE over io_uring ("uring"), each with nvmefsd and with the null
# server behind it, in one run:
#   null-classic         fuse-null -r over /dev/fuse: one pinned reader per
#                        CPU, each on a clone of the channel, answering in place
#   null-uring           fuse-null -u: one pinned thread and FUSE queue per
#                        CPU, answers in place, one io_uring_enter per batch
#   nvmefs-classic       nvmefsd, fuse_transport = classic, software
#                        controller, one 1 GiB RAM namespace, mode MODE
#   nvmefs-uring         the same with fuse_transport = uring
#   nvmefs-classic-nullns, nvmefs-uring-nullns
#                        the same with backing = null: no device model copy
#   nvmefs-classic-poll, nvmefs-uring-poll
#                        RAM namespace, mode = poll; the QD1 jobs only
# Every round starts each server in turn (the order reversed every other
# round, so that drift in a shared machine spreads over all) and runs the same
# fio jobs against it.  The report gives each job's median over the rounds,
# then each nvmefsd target's ratio to the null server on the same transport
# beside the goal it is held to.  The machine is shared and noisy: the
# ratios within one run are what count.
#
# Usage: bench/fuse-transports.sh [-o FILE] [-b BUILD] [-t "TARGETS"]
#   -o  also write the report to FILE
#   -b  build directory holding tools/fuse-null and nvmefsd
#       (default: $BUILD, else build/ in the repository)
#   -t  targets (default: all eight above)
# Environment:
#   RUNTIME=s   seconds per fio job after a RAMP (default 10; RAMP default 2)
#   ROUNDS=n    rounds (default 5)
#   DEPTH=n     entries per FUSE queue of fuse-null -u and of nvmefsd (default 16)
#   QUEUES=n    nvmefsd engine queues (default: the number of CPUs)
#   MODE=m      nvmefsd engine mode of the targets without -poll: poll,
#               interrupt or hybrid (default hybrid, the daemon's default)
#   NULL_CLASSIC_OPTS, NULL_URING_OPTS   fuse-null options for its two targets
#               (default "-r -t NCPU" and "-d DEPTH"; -p makes either poll;
#               without -r the classic one runs libfuse's loop instead)
#   LOAD=n      loaded mode: n CPU-bound processes (a shell's busy loop each,
#               default priority, free to move) run beside the whole run, so
#               beside every target alike, as applications share a storage
#               host's CPUs (default 0: a quiet run); the 4K QD32x2 goal is
#               then 0.85, the other jobs' ratios are printed without one
#   JOB_FILTER=re  only the jobs whose name matches (grep -E), e.g. 'QD32x2|QD1'
#   NVMEFSD=PATH  the daemon to run instead of BUILD/nvmefsd
# FUSE over io_uring needs /sys/module/fuse/parameters/enable_uring: the run
# sets it to Y (root) and puts the old value back at the end.  Every mount
# and process it starts is removed on exit.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-5}
DEPTH=${DEPTH:-16}
NCPU=$(nproc)
QUEUES=${QUEUES:-$NCPU}
MODE=${MODE:-hybrid}
LOAD=${LOAD:-0}
JOB_FILTER=${JOB_FILTER:-}
NULL_CLASSIC_OPTS=${NULL_CLASSIC_OPTS:-"-r -t $NCPU"}
NULL_URING_OPTS=${NULL_URING_OPTS:-"-d $DEPTH"}
OUT=
BUILDDIR=${BUILD:-$ROOT/build}
ALL_TARGETS="null-classic null-uring nvmefs-classic nvmefs-uring nvmefs-classic-nullns nvmefs-uring-nullns nvmefs-classic-poll nvmefs-uring-poll"
TARGETS=$ALL_TARGETS
SIZE=1G
URING_PARAM=/sys/module/fuse/parameters/enable_uring

# bench_getopts and the checks, is_mounted, unmount, stop_pid, stop_all,
# wait_mount, logtail
. "$ROOT/bench/fuse-lib.sh"
bench_opt() { # -t TARGETS
	TARGETS=$2
}
bench_getopts "t:" "$@"
check_num RUNTIME "$RUNTIME"
case $RAMP in '' | *[!0-9]*) bench_fail "RAMP: a whole number of seconds" ;; esac
check_num ROUNDS "$ROUNDS"
check_num DEPTH "$DEPTH"
check_num QUEUES "$QUEUES"
check_mode MODE "$MODE"
# shellcheck disable=SC2086
check_among -t "$ALL_TARGETS" $TARGETS
case $LOAD in '' | *[!0-9]*) bench_fail "LOAD: a whole number of processes" ;; esac
NVMEFSD=${NVMEFSD:-$BUILDDIR/nvmefsd}
NULLBIN=$BUILDDIR/tools/fuse-null

# ---- what is there ----
bench_need fio python3

# name|ioengine|rw|bs|iodepth|numjobs[|cpus] (the metric follows from the
# name: QD1 latency, 1M MiB/s, else IOPS; cpus: fio's cpus_allowed).  QD1
# twice: fio free to move between CPUs (as a user's program is), and pinned
# to CPU 0, where a move between CPUs per request, which the scheduler makes
# often on two CPUs, does not count
JOBS=(
	"4K randread QD32x2|libaio|randread|4k|32|2"
	"4K randwrite QD32x2|libaio|randwrite|4k|32|2"
	"4K randread QD1|libaio|randread|4k|1|1"
	"4K randread QD1 pinned|libaio|randread|4k|1|1|0"
	"1M read QD4|libaio|read|1M|4|1"
	"1M read QD8|libaio|read|1M|8|1"
	"1M write QD4|libaio|write|1M|4|1"
	"1M write QD8|libaio|write|1M|8|1"
	"4K randwrite psync x4|psync|randwrite|4k|1|4"
)

# the jobs a target runs: the -poll targets only the QD1 one; JOB_FILTER
jobs_of() {
	local j
	for j in "${JOBS[@]}"; do
		case $1 in *-poll) case ${j%%|*} in *QD1*) ;; *) continue ;; esac ;; esac
		if [ -n "$JOB_FILTER" ]; then echo "${j%%|*}" | grep -Eq "$JOB_FILTER" || continue; fi
		printf '%s\n' "$j"
	done
}

njobs=0
for t in $TARGETS; do njobs=$((njobs + $(jobs_of "$t" | wc -l))); done
est=$((ROUNDS * (njobs * (RUNTIME + RAMP + 1) + $(echo "$TARGETS" | wc -w) * 3)))
bench_estimate $est "$ROUNDS rounds x $njobs fio jobs x (${RUNTIME} s + ${RAMP} s ramp)"

# ---- bookkeeping, cleanup ----
bench_work
FIOPID=
HOGS=()
URING_OLD=
NOTES=$WORK/notes
: >"$NOTES"

cleanup() {
	local h
	if [ -n "$FIOPID" ]; then stop_pid "$FIOPID"; fi
	stop_all
	for h in "${HOGS[@]}"; do kill -KILL "$h" 2>/dev/null; wait "$h" 2>/dev/null; done
	if [ -n "$URING_OLD" ]; then
		echo "$URING_OLD" >"$URING_PARAM" 2>/dev/null ||
			echo "fuse-transports: could not put $URING_PARAM back to $URING_OLD" >&2
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# FUSE over io_uring: on for this run (read by the kernel at each mount)
URING_WHY=
if [ ! -e "$URING_PARAM" ]; then
	URING_WHY="this kernel has no FUSE over io_uring ($URING_PARAM missing)"
else
	cur=$(cat "$URING_PARAM")
	if [ "$cur" != Y ]; then
		if echo Y >"$URING_PARAM" 2>/dev/null; then
			URING_OLD=$cur
		else
			URING_WHY="cannot set $URING_PARAM to Y (root needed)"
		fi
	fi
fi

# ---- the targets: each start_* sets FILE or returns non-zero with WHY ----
start_null() { # LOG OPTS...
	local log=$1 mnt=$WORK/null
	shift
	if [ ! -x "$NULLBIN" ]; then
		WHY="no $NULLBIN; build it with: make B=$(basename "$BUILDDIR") $(basename "$BUILDDIR")/tools/fuse-null"
		return 1
	fi
	mkdir -p "$mnt"
	# shellcheck disable=SC2068 # the options are words
	"$NULLBIN" $@ -s "$SIZE" "$mnt" </dev/null >"$log" 2>&1 &
	PIDS+=($!)
	MOUNTS+=("$mnt")
	FILE=$mnt/null
	wait_mount "$mnt" "$FILE" $! 10 fuse-null "$log"
}

start_nvmefs() { # TRANSPORT LOG BACKING MODE
	local tr=$1 log=$2 backing=$3 mode=$4 mnt=$WORK/nvmefs conf=$WORK/nvmefs-$1.conf
	[ -x "$NVMEFSD" ] || { WHY="no $NVMEFSD"; return 1; }
	mkdir -p "$mnt"
	cat >"$conf" <<-EOF
	[daemon]
	mountpoint = $mnt
	admin_socket = $WORK/nvmefsd.sock
	file_mode = 0666
	file_owner = $(id -u)
	file_group = $(id -g)
	allow_other = no
	log_level = info
	fuse_transport = $tr
	fuse_queue_depth = $DEPTH

	[engine]
	queues = $QUEUES
	mode = $mode

	[controller nvme0]
	device = sim
	namespaces = 1
	size = $SIZE
	block_size = 4096
	backing = $backing
	exec = inline
	EOF
	"$NVMEFSD" -f -c "$conf" </dev/null >"$log" 2>&1 &
	PIDS+=($!)
	MOUNTS+=("$mnt")
	FILE=$mnt/nvme0n1
	wait_mount "$mnt" "$FILE" $! 10 nvmefsd "$log" || return 1
	[ "$backing" = ram ] || return 0
	# the RAM namespace's pages are mapped on first touch: touch them all
	# before measuring, or each first access pays a page fault (costly in
	# a guest) that a device does not
	dd if=/dev/zero of="$FILE" bs=1M count=$((${SIZE%G} * 1024)) oflag=direct conv=notrunc \
		status=none || { WHY="nvmefsd: filling the namespace failed"; return 1; }
}

# the daemon falls back to /dev/fuse when the ring cannot be set up: those
# would be classic numbers under the uring name
check_uring() { # LOG
	local log=$1
	dd if="$FILE" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
	sleep 0.3
	if grep -q 'io_uring transport failed' "$log" || ! grep -q 'serving over io_uring' "$log"; then
		WHY="nvmefsd does not serve over io_uring:"
		WHY="$WHY $(grep -i 'uring' "$log" | tail -n 1 | tr '|\t' '/ ')"
		return 1
	fi
}

# run_job ROUND TARGET "name|engine|rw|bs|qd|jobs": one fio run, one line
run_job() {
	local name eng rw bs qd nj cpus
	IFS='|' read -r name eng rw bs qd nj cpus <<<"$3"
	fio_job "$1"$'\t'"$2" "$FILE" "$name" "$eng" "$rw" "$bs" "$qd" "$nj" "$cpus"
}

unavailable() { # ROUND TARGET WHY
	local j
	echo "round $1: $2: not available ($3)" >&2
	jobs_of "$2" | while IFS= read -r j; do
		printf '%s\t%s\t%s\tNA\t%s\n' "$1" "$2" "${j%%|*}" "$3" >>"$RES"
	done
}

# ---- the run ----
# loaded mode: the CPU-bound processes, for the whole run
for _ in $(seq "$LOAD"); do
	sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
	HOGS+=($!)
done
[ "$LOAD" = 0 ] || echo "fuse-transports: $LOAD CPU-bound processes run beside every target" >&2
START=$(date -u '+%Y-%m-%d %H:%M UTC')
ORDER=$TARGETS
REVERSED=$(echo "$TARGETS" | tr ' ' '\n' | grep -v '^$' | tac | tr '\n' ' ')
for round in $(seq "$ROUNDS"); do
	if [ $((round % 2)) -eq 1 ]; then ORDER=$TARGETS; else ORDER=$REVERSED; fi
	for t in $ORDER; do
		FILE=
		WHY=
		log=$WORK/$t.r$round.log
		case $t in
		*-uring) [ -z "$URING_WHY" ] || { unavailable "$round" "$t" "$URING_WHY"; continue; } ;;
		esac
		case $t in
		null-classic) start_null "$log" $NULL_CLASSIC_OPTS ;;
		null-uring) start_null "$log" -u $NULL_URING_OPTS ;;
		nvmefs-classic) start_nvmefs classic "$log" ram "$MODE" ;;
		nvmefs-uring) start_nvmefs uring "$log" ram "$MODE" ;;
		nvmefs-classic-nullns) start_nvmefs classic "$log" null "$MODE" ;;
		nvmefs-uring-nullns) start_nvmefs uring "$log" null "$MODE" ;;
		nvmefs-classic-poll) start_nvmefs classic "$log" ram poll ;;
		nvmefs-uring-poll) start_nvmefs uring "$log" ram poll ;;
		esac &&
			case $t in nvmefs-uring*) check_uring "$log" ;; esac
		if [ $? -ne 0 ]; then
			unavailable "$round" "$t" "$WHY"
			stop_all
			continue
		fi
		echo "round $round: $t: $FILE" >&2
		while IFS= read -r j; do
			run_job "$round" "$t" "$j"
		done < <(jobs_of "$t")
		stop_all
		# fuse-null -u counts at exit which transport carried the requests
		if [ "$t" = null-uring ]; then
			ring=$(sed -n 's/^fuse-null: io_uring: \([0-9]*\) requests.*/\1/p' "$log")
			dev=$(sed -n 's/^fuse-null: \/dev\/fuse: \([0-9]*\) requests.*/\1/p' "$log")
			echo "round $round: null-uring: ${ring:-?} requests over io_uring," \
				"${dev:-?} over /dev/fuse" | tee -a "$NOTES" >&2
		fi
	done
done

# ---- the table ----
TABLE=$WORK/table.md
python3 - "$RES" "$TARGETS" "$LOAD" >"$TABLE" <<-'EOF'
import statistics, sys
res, targets, load = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
rows = [l.rstrip('\n').split('\t') for l in open(res) if l.strip()]
jobs, vals, why = [], {}, {}
for r in rows:
    rnd, t, job = r[0], r[1], r[2]
    if job not in jobs:
        jobs.append(job)
    if r[3] == 'NA':
        why.setdefault(t, r[4])
        continue
    vals.setdefault((t, job), []).append([float(x) for x in r[3:7]])

# a QD1 job gives two rows, mean and p99 latency
lines = []
for job in jobs:
    if 'QD1' in job.split():
        lines += [(job, 'mean', 2), (job, 'p99', 3)]
    elif job.startswith('1M'):
        lines.append((job, 'MiB/s', 1))
    else:
        lines.append((job, 'IOPS', 0))

def med(t, job, i):
    v = vals.get((t, job))
    return statistics.median(x[i] for x in v) if v else None

def fmt(unit, v):
    if v is None:
        return 'n/a'
    return f'{v:.1f}' if unit in ('mean', 'p99') else f'{v:.0f}'

cols = [c for c in ['null-classic', 'null-uring', 'nvmefs-classic', 'nvmefs-classic-nullns',
                    'nvmefs-classic-poll', 'nvmefs-uring', 'nvmefs-uring-nullns',
                    'nvmefs-uring-poll'] if c in targets]
print('Medians (latency in us):')
print()
print('| job | unit | ' + ' | '.join(cols) + ' |')
print('|---|---|' + '---:|' * len(cols))
for job, unit, i in lines:
    print(f'| {job} | {unit} | ' + ' | '.join(fmt(unit, med(c, job, i)) for c in cols) + ' |')

# each nvmefsd target against the null server on its transport, and the goal
def goal(job, unit, t):
    if load:
        return ('ge', 0.85) if 'QD32x2' in job else None
    if unit in ('mean', 'p99'):
        return ('le', 1.2)
    if job.startswith('1M'):
        return ('ge', 0.85)
    if 'QD32x2' in job:
        return ('ge', 0.97 if t.endswith('-nullns') else 0.90)
    return None

rcols = [c for c in cols if c.startswith('nvmefs-')]
print()
print('Ratios to the null server on the same transport (nvmefs / null; of latency '
      'lower is better, else higher), each with its goal, "miss" where it is not met:')
print()
print('| job | unit | ' + ' | '.join(rcols) + ' |')
print('|---|---|' + '---:|' * len(rcols))
for job, unit, i in lines:
    cells = []
    for c in rcols:
        peer = 'null-uring' if c.startswith('nvmefs-uring') else 'null-classic'
        a, b = med(c, job, i), med(peer, job, i)
        if a is None or b is None or not b:
            cells.append('-')
            continue
        r = round(a / b, 2)  # held to the goal as printed
        g = goal(job, unit, c)
        if g is None:
            cells.append(f'{r:.2f}')
            continue
        ok = r <= g[1] if g[0] == 'le' else r >= g[1]
        cells.append(f"{r:.2f} ({'<=' if g[0] == 'le' else '>='}{g[1]:.2f}{'' if ok else ', miss'})")
    print(f'| {job} | {unit} | ' + ' | '.join(cells) + ' |')
print()
print('Medians over the rounds; a ratio divides the medians.  -nullns: the '
      "namespace's backing is null (no device model copy); -poll: mode = poll, "
      'the QD1 jobs only; the others run in the MODE of the header.')
for c in cols:
    if c in why:
        print(f'\n{c}: not available in some or all rounds: {why[c]}')
EOF

{
	echo "fuse-transports: $START, $(uname -sr), $NCPU CPUs, $(fio --version), $ROUNDS rounds," \
		"${RUNTIME} s per job after ${RAMP} s ramp, direct=1; fuse-null classic: $NULL_CLASSIC_OPTS," \
		"uring: -u $NULL_URING_OPTS; nvmefsd: $QUEUES queues, mode $MODE, DEPTH $DEPTH," \
		"software controller (exec inline, write_cache volatile)$([ "$LOAD" = 0 ] ||
			echo "; $LOAD CPU-bound processes beside the whole run")"
	echo
	cat "$TABLE"
	if [ -s "$NOTES" ]; then
		echo
		sed 's/^/- /' "$NOTES"
	fi
} >"$WORK/report"
cat "$WORK/report"
if [ -n "$OUT" ]; then
	cp "$WORK/report" "$OUT" || { echo "fuse-transports: cannot write $OUT" >&2; exit 1; }
fi
exit 0
