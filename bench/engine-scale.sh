#!/bin/sh
# engine-scale.sh - IOPS of one reactor, and how it scales to two.
#
# 4 KiB randread on the software controller's null namespace executed inline
# (the device runs inside the doorbell write on the reactor's own thread),
# poll mode, QD 32 and 64 per qpair, -t seconds per run.  One reactor (cpu 0)
# and two reactors (cpus 0,1); every point runs RUNS times and the median is
# kept.  Goals: 15M IOPS per reactor; 2 reactors / 1 reactor >= 1.9.
# This machine has 2 cores shared with whatever else runs: the two-reactor
# figure leaves nothing for anybody else and is noisy; compare medians.
#
# Usage: bench/engine-scale.sh [-o FILE] [-t SEC] [-r RUNS] [-q "32 64"]
#   env B: build directory (default build)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) ;; *) B=$ROOT/$B ;; esac
PERF=$B/nvmefs-perf
OUT= SECS=10 RUNS=3 QDS="32 64"
while getopts o:t:r:q: opt; do
	case $opt in
	o) OUT=$OPTARG ;;
	t) SECS=$OPTARG ;;
	r) RUNS=$OPTARG ;;
	q) QDS=$OPTARG ;;
	*) echo "usage: $0 [-o FILE] [-t SEC] [-r RUNS] [-q \"QD...\"]" >&2; exit 2 ;;
	esac
done
[ -x "$PERF" ] || { echo "$0: $PERF missing: make B=$B $PERF" >&2; exit 2; }
command -v python3 >/dev/null || { echo "$0: python3 is missing" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

conf() { # reactors cpus
	cat <<CONF
[daemon]
log_level = warn
[engine]
queues = $1
cpus = $2
mode = poll
queue_depth = 256
cq_budget = 64
[controller nvme0]
device = sim
backing = null
exec = inline
size = 1G
max_queues = $1
CONF
}
conf 1 0 > "$TMP/r1.conf"
conf 2 0,1 > "$TMP/r2.conf"

: > "$TMP/runs"
for qd in $QDS; do
	for r in 1 2; do
		i=0
		while [ $i -lt "$RUNS" ]; do
			i=$((i + 1))
			if ! "$PERF" -c "$TMP/r$r.conf" -w randread -s 4096 -q "$qd" -t "$SECS" --json \
				> "$TMP/j" 2> "$TMP/e"; then
				echo "$0: nvmefs-perf failed (qd $qd, $r reactors):" >&2
				cat "$TMP/e" "$TMP/j" >&2
				exit 1
			fi
			python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); t=j["total"]
print(sys.argv[2], sys.argv[3], t["iops"], t["lat_us"]["p50"], t["lat_us"]["p99"], t["cpl_per_pass"], t["doorbells_per_io"],
      " ".join("%.0f" % x["iops"] for x in j["reactors"]))' "$TMP/j" "$qd" "$r" >> "$TMP/runs"
		done
	done
done

python3 - "$TMP/runs" "$SECS" "$RUNS" <<'PY' | tee "$TMP/report"
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
secs, runs = sys.argv[2], sys.argv[3]
print(f'4 KiB randread, null namespace, inline device, poll, {secs} s per run, median of {runs}')
print(f'{"QD":>4} {"reactors":>8} {"IOPS (median)":>14} {"per reactor":>12} {"p50 us":>7} {"p99 us":>7} {"cpl/pass":>8} {"db/io":>6}  runs (IOPS)')
med = {}
for qd in dict.fromkeys(r[0] for r in rows):
    for n in ('1', '2'):
        sel = [r for r in rows if r[0] == qd and r[1] == n]
        if not sel: continue
        iops = [float(r[2]) for r in sel]
        m = statistics.median(iops)
        mid = min(sel, key=lambda r: abs(float(r[2]) - m))
        med[(qd, n)] = m
        print(f'{qd:>4} {n:>8} {m/1e6:13.2f}M {m/int(n)/1e6:11.2f}M {float(mid[3]):7.2f} {float(mid[4]):7.2f} {float(mid[5]):8.1f} {float(mid[6]):6.3f}  '
              + ' '.join(f'{x/1e6:.2f}M' for x in iops))
for qd in dict.fromkeys(r[0] for r in rows):
    if (qd, '1') in med and (qd, '2') in med:
        one, two = med[(qd, '1')], med[(qd, '2')]
        print(f'QD {qd}: 1 reactor {one/1e6:.2f}M (goal 15M: {"met" if one >= 15e6 else "NOT met"}), '
              f'2/1 = {two/one:.2f} (goal >= 1.9: {"met" if two/one >= 1.9 else "NOT met"})')
PY
[ -z "$OUT" ] || cp "$TMP/report" "$OUT"
