# fuse-lib.sh - what the FUSE benchmarks share (sourced by bash scripts):
# their command line, mounts, stopping the servers they started, waiting
# for a mount.  The caller keeps PIDS and MOUNTS (arrays of what it
# started; bench_init empties them) and reads WHY after a failed wait_mount.

PIDS=()
MOUNTS=()

# bench_usage: the "# Usage:" block of the calling script's header, to the
# header's end
bench_usage() {
	sed -n '/^# Usage:/,/^[^#]/p' "$0" | sed '/^[^#]/d; s/^# \{0,1\}//'
}

# bench_fail MESSAGE: "SCRIPT: MESSAGE" on stderr, exit 2 (a usage error)
bench_fail() {
	echo "$(basename "$0" .sh): $*" >&2
	exit 2
}

# bench_getopts OWN "$@": the command line of a FUSE benchmark: -o FILE
# (OUT: also write the report there), -b DIR (BUILDDIR, made absolute), -h
# (bench_usage, exit 0), and the script's own options, OWN in getopts'
# spelling, each handed to the script's bench_opt LETTER VALUE (non-zero:
# a usage error).  No operands.  A bad option: the usage on stderr, exit 2.
bench_getopts() {
	local own=$1 opt
	shift
	OPTIND=1
	while getopts "o:b:h$own" opt; do
		case $opt in
		o) OUT=$OPTARG ;;
		b) BUILDDIR=$OPTARG ;;
		h) bench_usage; exit 0 ;;
		\?) bench_usage >&2; exit 2 ;;
		*) bench_opt "$opt" "${OPTARG:-}" || { bench_usage >&2; exit 2; } ;;
		esac
	done
	shift $((OPTIND - 1))
	[ $# -eq 0 ] || { bench_usage >&2; exit 2; }
	BUILDDIR=$(cd "$BUILDDIR" 2>/dev/null && pwd || echo "$BUILDDIR")
}

# bench_outdir NAME [DIR]: OUT, the directory for the fio outputs: DIR, or a
# new /tmp/nvmefs-NAME.XXXXXX
bench_outdir() {
	OUT=${2:-$(mktemp -d "/tmp/nvmefs-$1.XXXXXX")}
	mkdir -p "$OUT" || bench_fail "cannot make $OUT"
}

# bench_need TOOL...: each TOOL, fusermount3 and /dev/fuse are there, or
# say what is missing and exit 1
bench_need() {
	local t me
	me=$(basename "$0" .sh)
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 ||
			{ echo "$me: $t is missing (scripts/deps.sh bench installs it)" >&2; exit 1; }
	done
	command -v fusermount3 >/dev/null 2>&1 || { echo "$me: fusermount3 is missing (package fuse3)" >&2; exit 1; }
	[ -e /dev/fuse ] || { echo "$me: /dev/fuse does not exist: FUSE is not available here" >&2; exit 1; }
}

# bench_work: WORK, a scratch directory (the caller's cleanup removes it),
# and RES, an empty results file in it
bench_work() {
	WORK=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
	RES=$WORK/results.tsv
	: >"$RES"
}

# bench_estimate SECONDS WHAT: how long the run will take, on stderr
bench_estimate() {
	echo "$(basename "$0" .sh): $2: about $1 s ($((($1 + 59) / 60)) min)" >&2
}

# fio_job PREFIX FILE NAME ENGINE RW BS QD JOBS [CPUS]: one fio run of
# RUNTIME s after RAMP s on FILE (direct, group_reporting, latency
# percentiles, fio's cpus_allowed CPUS if given), in the background
# (FIOPID, so that a signal ends the run at once: the caller's cleanup
# stops it).  Appends one line to RES: PREFIX (tab-separated fields), NAME,
# then IOPS, MiB/s, mean and p99 latency in us; or NA and why.
fio_job() {
	local prefix=$1 file=$2 name=$3 eng=$4 rw=$5 bs=$6 qd=$7 nj=$8 cpus=${9:-} rc
	local json=$WORK/fio.json err=$WORK/fio.err
	fio --name="${name// /_}" --filename="$file" --ioengine="$eng" --direct=1 \
		${cpus:+--cpus_allowed="$cpus"} \
		--rw="$rw" --bs="$bs" --iodepth="$qd" --numjobs="$nj" --group_reporting \
		--time_based --runtime="$RUNTIME" --ramp_time="$RAMP" --lat_percentiles=1 \
		--output-format=json --output="$json" </dev/null >/dev/null 2>"$err" &
	FIOPID=$!
	wait $FIOPID
	rc=$?
	FIOPID=
	if [ $rc -ne 0 ]; then
		echo "${prefix//$'\t'/ }: $name: fio failed" >&2
		logtail "$err"
		printf '%s\t%s\tNA\tfio failed\n' "$prefix" "$name" >>"$RES"
		return
	fi
	python3 - "$json" "$prefix" "$name" >>"$RES" <<-'EOF' ||
	import json, sys
	path, prefix, name = sys.argv[1:4]
	with open(path) as f:
	    text = f.read()
	# fio may print notes before the JSON object
	job = json.loads(text[text.index('{'):])['jobs'][0]
	errs = job.get('error', 0)
	d = job['read'] if job['read']['io_bytes'] > 0 else job['write']
	if errs or d['io_bytes'] == 0:
	    print(f"{prefix}\t{name}\tNA\tfio error {errs}")
	else:
	    p99 = d['lat_ns'].get('percentile', {}).get('99.000000', 0)
	    print(f"{prefix}\t{name}\t{d['iops']:.0f}\t{d['bw_bytes'] / 2**20:.1f}\t"
	          f"{d['lat_ns']['mean'] / 1000:.1f}\t{p99 / 1000:.1f}")
	EOF
		printf '%s\t%s\tNA\tunreadable fio output\n' "$prefix" "$name" >>"$RES"
}

# num_ok VALUE: a whole number > 0
num_ok() { case $1 in '' | *[!0-9]* | 0) return 1 ;; esac; }
# check_num NAME VALUE: num_ok, else a usage error naming NAME
check_num() { num_ok "$2" || bench_fail "$1: a whole number > 0"; }
# check_mode NAME VALUE: an engine mode, else a usage error
check_mode() {
	case $2 in poll | interrupt | hybrid) ;; *) bench_fail "$1: poll, interrupt or hybrid" ;; esac
}
# check_among NAME "ALLOWED" VALUES...: every value is one of ALLOWED
check_among() {
	local what=$1 allowed=$2 v
	shift 2
	for v in "$@"; do
		case " $allowed " in *" $v "*) ;; *) bench_fail "$what: unknown $v (one of: $allowed)" ;; esac
	done
}

is_mounted() { awk -v p="$1" '$2 == p { f = 1 } END { exit !f }' /proc/mounts; }

unmount() {
	is_mounted "$1" || return 0
	fusermount3 -u "$1" 2>/dev/null || fusermount3 -u -z "$1" 2>/dev/null || umount -l "$1" 2>/dev/null
}

# stop_pid PID [SECONDS]: SIGTERM, then SIGKILL after SECONDS (10)
stop_pid() {
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq $((${2:-10} * 10))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# every process in PIDS, last started first (a client before the server it
# talks to), then every mount in MOUNTS; STOP_SECONDS as for stop_pid
stop_all() {
	local i m
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}" "${STOP_SECONDS:-10}"; done
	for m in "${MOUNTS[@]}"; do unmount "$m"; done
	PIDS=()
	MOUNTS=()
}

# wait_mount MNT FILE PID SECONDS NAME LOG: MNT is a mount and FILE exists
# while PID lives; otherwise WHY says what happened, with the log's last line
wait_mount() {
	local mnt=$1 file=$2 pid=$3 n=$(($4 * 10)) name=$5 log=$6 last
	while [ $n -gt 0 ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null
			WHY="$name exited ($?) before mounting"
			break
		fi
		is_mounted "$mnt" && [ -e "$file" ] && return 0
		sleep 0.1
		n=$((n - 1))
	done
	[ $n -gt 0 ] || WHY="$name did not mount within $4 s"
	last=$(grep -v '^[[:space:]]*$' "$log" 2>/dev/null | tail -n 1 | tr '|\t' '/ ')
	[ -z "$last" ] || WHY="$WHY: $last"
	return 1
}

logtail() { [ -s "$1" ] && tail -n 3 "$1" | sed 's/^/    /' >&2; }
