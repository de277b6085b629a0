#!/bin/bash
# ctrl-isolation.sh - one controller's trouble against another's I/O: fio 4K
# randread at QD32 on nvme1 alone (baseline) and while nvme0, loaded past its
# queue (4K randread at QD256, more than its trackers), is in trouble, on one
# nvmefsd with two software controllers (exec = thread, RAM namespaces) and
# one reactor:
#   hang    nvme0 stops fetching commands for the whole measurement;
#           io_timeout_ms = 30000, so nothing times out meanwhile.
#   resets  nvme0 in a reset loop with io_timeout_ms = 1000 (the software
#           controller's hang-loop fault): its commands time out, the Abort
#           is not answered, the controller is reset and brought up again
#           (its admin commands answered) and hangs at the first I/O
#           command sent again, over and over: a reset about every 1.25 s,
#           no I/O of nvme0 served in between.
#   slow    every completion of nvme0 comes 1.5 s late with io_timeout_ms =
#           1000: a reset loop too, but the software controller then spends
#           a good part of a CPU on its late completions (it scans them
#           while it spins), which this 2-CPU machine's reactor misses.
# Each fault gets its own daemon (its io_timeout_ms); on it baseline and
# fault rounds alternate, ROUNDS of each.  The fault is injected, once
# nvme0's requests are seen waiting for a tracker, before nvme1's fio starts,
# and lifted 3 s after fio's runtime would have ended.  fio runs no ramp: it
# ends a ramp only when an I/O completes, and on a daemon where nvme1's reads
# wait for nvme0 that would move the measurement past the fault.  The table
# gives per fault the medians of nvme1's IOPS and completion latency p99,
# p99.9 and max, for the baseline and under the fault, and the ratio of the
# two, and the median of each round's ratio (fault over the baseline run
# next to it); and the CPU time the reactor thread (and the whole daemon)
# used per nvme1 read over fio's runtime, which depends much less on what
# else the machine runs than the rates do.  The machine is shared and
# noisy: compare within one run.
#
# Usage: bench/ctrl-isolation.sh [-o FILE] [-b BUILD] [-f "FAULTS"]
#   -o  also write the report to FILE
#   -b  build directory holding nvmefsd and nvmefsctl
#       (default: $BUILD, else build/ in the repository)
#   -f  faults (default "hang resets slow")
# Environment:
#   RUNTIME=s   seconds of nvme1's fio (default 10)
#   ROUNDS=n    rounds of each, baseline and fault (default 3)
#   MODE=m      engine mode: poll, interrupt or hybrid (default hybrid)
#   CPU=n       the reactor's CPU (default the last one: the integration
#               tests, which may run meanwhile on a shared machine, pin
#               theirs to CPU 0)
#   NVMEFSD=PATH, NVMEFSCTL=PATH  the binaries to run instead of BUILD's
# Every mount and process it starts is removed on exit.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNTIME=${RUNTIME:-10}
ROUNDS=${ROUNDS:-3}
MODE=${MODE:-hybrid}
CPU=${CPU:-$(($(nproc) - 1))}
OUT=
BUILDDIR=${BUILD:-$ROOT/build}
FAULTS="hang resets slow"

# bench_getopts and the checks, is_mounted, unmount, stop_pid, stop_all,
# wait_mount, logtail
. "$ROOT/bench/fuse-lib.sh"
bench_opt() { # -f FAULTS
	FAULTS=$2
}
bench_getopts "f:" "$@"
check_num RUNTIME "$RUNTIME"
check_num ROUNDS "$ROUNDS"
check_mode MODE "$MODE"
case $CPU in '' | *[!0-9]*) bench_fail "CPU: a CPU number" ;; esac
# shellcheck disable=SC2086
check_among -f "hang resets slow" $FAULTS
NVMEFSD=${NVMEFSD:-$BUILDDIR/nvmefsd}
NVMEFSCTL=${NVMEFSCTL:-$BUILDDIR/nvmefsctl}
for b in "$NVMEFSD" "$NVMEFSCTL"; do
	[ -x "$b" ] || { echo "ctrl-isolation: no $b (make)" >&2; exit 1; }
done
bench_need fio python3

nfaults=$(echo "$FAULTS" | wc -w)
est=$((nfaults * (ROUNDS * 2 * (RUNTIME + 8) + 20)))
bench_estimate $est "$nfaults faults x $ROUNDS rounds x (baseline + fault) x ${RUNTIME} s"

# ---- bookkeeping, cleanup ----
bench_work
LOADPID=

cleanup() {
	[ -n "$LOADPID" ] && stop_pid "$LOADPID"
	stop_all
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_ms() { echo $(($(date +%s%N) / 1000000)); }
ctl() { timeout 20 "$NVMEFSCTL" -s "$WORK/nvmefsd.sock" "$@"; }
json() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
# the controllers' table comes first (the health table names them too)
state0() { ctl status | awk '$1 == "nvme0" { print $2; exit }'; }
slot_waits() { ctl stats --json | json "d['fuse']['waits']['queue_slot']"; }
slot_parked() { ctl stats --json | json "d['fuse']['parked']['queue_slot']"; }
resets0() { ctl stats --json | json "d['controllers'][0]['recovery']['resets_started']"; }
failed0() { ctl stats --json | json "d['controllers'][0]['recovery']['resets_failed']"; }

# start_daemon FAULT: nvmefsd with io_timeout_ms for FAULT, both
# namespaces filled (first touch of a RAM namespace costs a page fault)
start_daemon() {
	local to mnt=$WORK/mnt conf=$WORK/nvmefs.conf log=$WORK/nvmefsd-$1.log
	case $1 in hang) to=30000 ;; *) to=1000 ;; esac
	mkdir -p "$mnt"
	cat >"$conf" <<-EOF
	[daemon]
	mountpoint = $mnt
	admin_socket = $WORK/nvmefsd.sock
	file_mode = 0666
	allow_other = no
	log_level = info
	fuse_transport = classic

	[engine]
	queues = 1
	cpus = $CPU
	mode = $MODE
	io_timeout_ms = $to

	[controller nvme0]
	device = sim
	namespaces = 1
	size = 256M
	block_size = 4096
	backing = ram
	exec = thread

	[controller nvme1]
	device = sim
	namespaces = 1
	size = 1G
	block_size = 4096
	backing = ram
	exec = thread
	EOF
	"$NVMEFSD" -f -c "$conf" </dev/null >"$log" 2>&1 &
	DPID=$!
	PIDS+=($!)
	MOUNTS+=("$mnt")
	F0=$mnt/nvme0n1
	F1=$mnt/nvme1n1
	wait_mount "$mnt" "$F1" $! 10 nvmefsd "$log" || { echo "ctrl-isolation: $WHY" >&2; exit 1; }
	RTID=$(for t in /proc/$DPID/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = nvme-r0 ] && basename "$t"
	done)
	[ -n "$RTID" ] || { echo "ctrl-isolation: no reactor thread (nvme-r0) in nvmefsd" >&2; exit 1; }
	dd if=/dev/zero of="$F0" bs=1M count=256 oflag=direct conv=notrunc status=none &&
		dd if=/dev/zero of="$F1" bs=1M count=1024 oflag=direct conv=notrunc status=none ||
		{ echo "ctrl-isolation: filling the namespaces failed" >&2; exit 1; }
}

# CPU time (clock ticks, user + system) of the reactor thread and of the
# whole daemon: "REACTOR DAEMON"
cpu_ticks() {
	echo "$(awk '{ print $14 + $15 }' "/proc/$DPID/task/$RTID/stat")" \
		"$(awk '{ print $14 + $15 }' "/proc/$DPID/stat")"
}

stop_daemon() {
	stop_all
}

# fault_on FAULT: nvme0's load running past its trackers, then the fault
fault_on() {
	local w end
	w=$(slot_waits)
	timeout -s KILL $((RUNTIME + 120)) fio --name=load0 --filename="$F0" \
		--ioengine=libaio --direct=1 --rw=randread --bs=4k --iodepth=256 --time_based \
		--runtime=$((RUNTIME + 60)) --continue_on_error=all --output=/dev/null \
		>/dev/null 2>&1 &
	LOADPID=$!
	end=$(($(now_ms) + 20000))
	while [ "$(slot_waits)" -le "$w" ]; do
		[ "$(now_ms)" -lt $end ] || { echo "ctrl-isolation: nvme0's load never waited for a tracker" >&2; exit 1; }
		sleep 0.2
	done
	R0=$(resets0)
	FAIL0=$(failed0)
	case $1 in
	hang) ctl inject nvme0 hang >/dev/null ;;
	resets) ctl inject nvme0 hang-loop >/dev/null ;;
	slow) ctl inject nvme0 delay 1500 >/dev/null ;;
	esac
}

# fault_off FAULT: lift it, stop nvme0's load, wait for nvme0 to be live
fault_off() {
	local end
	case $1 in
	hang) ctl inject nvme0 unhang >/dev/null ;;
	resets) ctl inject nvme0 unhang >/dev/null ;;
	slow) ctl inject nvme0 delay 0 >/dev/null ;;
	esac
	NRESETS=$(($(resets0) - R0))/$(($(failed0) - FAIL0))
	stop_pid "$LOADPID" 30
	LOADPID=
	end=$(($(now_ms) + 60000))
	while [ "$(state0)" != live ]; do
		[ "$(state0)" = failed ] && ctl attach nvme0 >/dev/null
		[ "$(now_ms)" -lt $end ] || { echo "ctrl-isolation: nvme0 not live again" >&2; exit 1; }
		sleep 0.2
	done
}

# measure FAULT KIND ROUND: nvme1's fio; KIND base or fault; one result line
measure() {
	local f=$1 kind=$2 round=$3 out=$WORK/fio-$1-$2-$3.json fpid
	[ "$kind" = fault ] && fault_on "$f"
	timeout -s KILL $((RUNTIME + 300)) fio --name=read1 --filename="$F1" \
		--ioengine=libaio --direct=1 --rw=randread --bs=4k --iodepth=32 --time_based \
		--runtime="$RUNTIME" --output-format=json --output="$out" >/dev/null 2>&1 &
	fpid=$!
	# the CPU over fio's runtime; halfway, under the fault, how many
	# requests wait for a tracker
	cpu0=$(cpu_ticks)
	sleep $((RUNTIME / 2))
	[ "$kind" = fault ] && PARKED=$(slot_parked)
	sleep $((RUNTIME - RUNTIME / 2))
	cpu1=$(cpu_ticks)
	if [ "$kind" = fault ]; then
		# the fault outlasts the fio job (which may wait for it to
		# end) by 3 s, for fio's start
		sleep 3
		fault_off "$f"
	fi
	wait "$fpid" || { echo "ctrl-isolation: fio on nvme1 failed ($f $kind $round)" >&2; exit 1; }
	python3 - "$out" "$f" "$kind" "$round" "${NRESETS:-0}" "${PARKED:-0}" "$RUNTIME" \
		"$(getconf CLK_TCK)" $cpu0 $cpu1 >>"$RES" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
r = json.loads(t[t.index("{"):])["jobs"][0]["read"]
c = r["clat_ns"]
p = c.get("percentile", {})
# CPU microseconds per read over fio's runtime: reactor thread, daemon
reads = r["iops"] * float(sys.argv[7])
hz = float(sys.argv[8])
r0, d0, r1, d1 = (float(x) for x in sys.argv[9:13])
us = lambda ticks: "%.1f" % (ticks / hz * 1e6 / reads) if reads else "0"
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], "%.0f" % r["iops"],
                 "%.0f" % (p.get("99.000000", 0) / 1e3), "%.0f" % (p.get("99.900000", 0) / 1e3),
                 "%.0f" % (c["max"] / 1e3), sys.argv[5], sys.argv[6], us(r1 - r0), us(d1 - d0)]))
PY
	NRESETS= PARKED=
	tail -n 1 "$RES" | awk -F'\t' '{ printf "  %s %s round %s: %s IOPS, p99 %s us, p99.9 %s us, max %s us, CPU per read: reactor %s us, nvmefsd %s us%s\n",
		$1, $2, $3, $4, $5, $6, $7, $10, $11, $2 == "fault" ? ", nvme0 resets " $8 ", parked for a slot " $9 : "" }' >&2
}

for f in $FAULTS; do
	echo "ctrl-isolation: $f: starting nvmefsd" >&2
	start_daemon "$f"
	for r in $(seq "$ROUNDS"); do
		# alternate which comes first, so that drift spreads over both
		if [ $((r % 2)) = 1 ]; then
			measure "$f" base "$r"
			measure "$f" fault "$r"
		else
			measure "$f" fault "$r"
			measure "$f" base "$r"
		fi
	done
	stop_daemon
done

report() {
	echo "nvme1: fio 4K randread QD32, libaio, direct; nvme0: 4K randread QD256 and the fault."
	echo "$ROUNDS rounds of ${RUNTIME} s, medians; mode $MODE, 1 reactor on CPU $CPU, /dev/fuse."
	echo
	python3 - "$RES" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print("| nvme0 | nvme1 IOPS base | under fault | ratio | p99 base (us) | under fault | ratio "
      "| p99.9 base (us) | under fault | ratio | max base (us) | under fault | nvme0 resets: median started / all failed |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for f in dict.fromkeys(r[0] for r in rows):
    def med(kind, col):
        return statistics.median(float(r[col]) for r in rows if r[0] == f and r[1] == kind)
    b = [med("base", i) for i in (3, 4, 5, 6)]
    x = [med("fault", i) for i in (3, 4, 5, 6)]
    # resets started/failed per fault round: the median started, all failed
    rs = [r[7].split("/") for r in rows if r[0] == f and r[1] == "fault"]
    n = "%d/%d" % (statistics.median(int(a) for a, _ in rs), sum(int(c) for _, c in rs))
    ratio = lambda a, c: "%.2f" % (c / a) if a else "-"
    print("| %s | %.0f | %.0f | %s | %.0f | %.0f | %s | %.0f | %.0f | %s | %.0f | %.0f | %s |" % (
        f, b[0], x[0], ratio(b[0], x[0]), b[1], x[1], ratio(b[1], x[1]), b[2], x[2],
        ratio(b[2], x[2]), b[3], x[3], n if f != "hang" else "-"))
print()
print("The same as the median over the rounds of fault / baseline of the same round (the two")
print("ran one after the other, so that the machine's drift between rounds cancels):")
print()
print("| nvme0 | IOPS | p99 | p99.9 | max | reactor CPU per read | nvmefsd CPU per read |")
print("|---|---|---|---|---|---|---|")
for f in dict.fromkeys(r[0] for r in rows):
    base = {r[2]: r for r in rows if r[0] == f and r[1] == "base"}
    cells = []
    for col in (3, 4, 5, 6, 9, 10):
        q = [float(r[col]) / float(base[r[2]][col]) for r in rows
             if r[0] == f and r[1] == "fault" and r[2] in base and float(base[r[2]][col])]
        cells.append("%.2f" % statistics.median(q) if q else "-")
    print("| %s | %s |" % (f, " | ".join(cells)))
print()
print("Every round:")
print()
print("| nvme0 | kind | round | IOPS | p99 (us) | p99.9 (us) | max (us) | reactor CPU per read (us) | nvmefsd CPU per read (us) | nvme0 resets started/failed | parked for a slot, halfway |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    x = r[7:9] if r[1] == "fault" else ["-", "-"]
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % tuple(r[:7] + r[9:11] + x))
PY
}

if [ -n "$OUT" ]; then
	report | tee "$OUT"
else
	report
fi
