#!/bin/sh
# t-fault-isolation.sh - one controller's trouble holds up no I/O of another.
# Two software controllers served by one reactor (on the last CPU: other
# tests pin theirs to CPU 0; queue_depth 16: 7 trackers per qpair); nvme0
# runs fio at QD 16, more than its trackers, so
# that its requests wait in the scheduler for a tracker (checked before each
# fault); fio 4 KiB randread at QD 8 runs on nvme1 meanwhile.
# io_timeout_ms = 10000.
#   1. nvme0 hangs for 9 s, then unhang.
#   2. nvme0 is reset again and again for 30 s: every command is delayed
#      past io_timeout_ms, times out, the Abort is not answered in time, a
#      reset sends it again; then the delay is lifted.
# During each fault nvme1 must complete commands (the engine's count) and
# its fio, running from before the fault until told to stop after it, must
# end without error with none of its I/Os taking half of io_timeout_ms: one that waited
# behind nvme0 would wait until nvme0's commands complete, time out or are
# reset.  The bound is that generous because the machines these run on are
# shared: a busy host alone has delayed an I/O by 3.5 s.  No speed is
# asserted.  After each fault nvme0 is live again and dd + cmp works on it.
. "$(dirname "$0")/fault-lib.sh"
IO_TIMEOUT=10000 QD=16 FAULT_CTRLS=2 FUSE_QD=32
CPUS=$(($(getconf _NPROCESSORS_ONLN) - 1))
export IO_TIMEOUT QD FAULT_CTRLS FUSE_QD CPUS
fault_start
G=$MNT/nvme1n1
LIMIT_MS=$((IO_TIMEOUT / 2))
dd_cmp || fail "baseline dd + cmp on nvme0"

slot_waits() {
	ctl stats --json | json "d['fuse']['waits']['queue_slot']"
}

# nvme1's commands completed so far, on every reactor
done1() {
	ctl stats --json | json "sum(q['completed'] for r in d['reactors'] for q in r['qpairs'] if q['controller'] == 'nvme1')"
}

# running1: wait (30 s at most) until nvme1's fio does I/O (it may take
# seconds to start on a busy host)
running1() {
	r1_n=$(done1)
	wait_until 30 eval '[ "$(done1)" -gt "$r1_n" ]' && return 0
	fail "fio on nvme1 did no I/O within 30 s"
	return 1
}

# stalling: wait (30 s at most) until nvme0's requests wait for trackers:
# its load runs, past its queue (fio may take seconds to start on a busy
# host: nvme1's is started after this)
stalling() {
	st_w=$(slot_waits)
	wait_until 30 eval '[ "$(slot_waits)" -gt "$st_w" ]' && return 0
	fail "nvme0's requests never waited for a tracker"
	return 1
}

# load0: nvme0, QD 16 of 4-64 KiB reads and writes, errors allowed, until
# stop0 (120 s at most)
load0() {
	timeout -s KILL 180 env $(fio_env) fio --name=load0 --filename="$F" --ioengine=libaio --allow_file_create=0 \
		--direct=1 --rw=randrw --bsrange=4k-64k --iodepth=16 --size=32M \
		--runtime=120 --time_based --continue_on_error=all \
		--output="$TMP/load0.out" > /dev/null 2>&1 &
	L0=$!
}

# stop0: end nvme0's load (it runs past the fault)
stop0() {
	kill "$L0" 2> /dev/null
	wait "$L0"
}

# read1 TAG: nvme1, 4 KiB randread QD 8, JSON, until check1 stops it (a
# fixed runtime would race with a slow host; 120 s at most; no timeout(1)
# around it, which would not pass SIGINT on as fio wants it)
read1() {
	env $(fio_env) fio --name=read1 --filename="$G" --ioengine=libaio \
		--direct=1 --rw=randread --bs=4k --iodepth=8 --size=48M --runtime=120 \
		--time_based --output-format=json --output="$TMP/$1.json" > "$TMP/$1.err" 2>&1 &
	R1=$!
}

# fault_begin / fault_end: the fault's window, nvme1's completions in it,
# and whether both fios ran all through it
fault_begin() {
	running1
	C1=$(done1)
	t0=$(now_ms)
}
fault_end() {
	t1=$(now_ms)
	C1=$(($(done1) - C1))
	kill -0 "$R1" 2> /dev/null || fail "$1: fio on nvme1 ended before the fault did"
	kill -0 "$L0" 2> /dev/null || fail "$1: fio on nvme0 ended before the fault did"
}

# check1 TAG: nvme1's controller completed commands during the fault, its
# fio (stopped now: on SIGINT it reports and exits 0 or 128 depending on the
# shell, so its report says whether it went well) saw no error and its
# slowest I/O took less than LIMIT_MS
check1() {
	sleep 1
	kill -INT "$R1"
	wait "$R1"
	grep -q '"jobs"' "$TMP/$1.json" 2> /dev/null ||
		{ fail "$1: fio on nvme1 wrote no report"; cat "$TMP/$1.err"; return; }
	python3 - "$TMP/$1.json" "$C1" $((t1 - t0)) "$LIMIT_MS" "$1" <<'PY' ||
import json, sys
jf, done, ms, limit, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    float(sys.argv[4]), sys.argv[5]
t = open(jf).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
r = j["read"]
mx = r["clat_ns"]["max"] / 1e6
smx = r["slat_ns"]["max"] / 1e6
pc = r["clat_ns"].get("percentile", {})
p99 = pc.get("99.000000", 0) / 1e6
p999 = pc.get("99.900000", 0) / 1e6
ok = True
if j["error"] or r["io_bytes"] == 0:
    print("FAIL: %s: fio error %d, %d bytes read" % (tag, j["error"], r["io_bytes"]))
    ok = False
print("measure: %s: nvme1 4k randread QD8: %.0f IOPS, clat p99 %.2f ms, p99.9 %.2f ms, "
      "max %.2f ms (limit %.0f), slat max %.2f ms; %d commands of nvme1 completed during "
      "the %d ms of the fault" % (tag, r["iops"], p99, p999, mx, limit, smx, done, ms))
if done == 0:
    print("FAIL: %s: nvme1 completed no command during the fault" % tag)
    ok = False
if mx >= limit:
    print("FAIL: %s: an I/O of nvme1 took %.0f ms, half of io_timeout_ms is %.0f" % (tag, mx, limit))
    ok = False
sys.exit(0 if ok else 1)
PY
		fail "$1: nvme1 waited for nvme0"
}

# ---- 1. hang ----
load0
stalling
read1 hang
fault_begin
ctl inject nvme0 hang > /dev/null || fail "inject hang"
sleep 9
fault_end hang
ctl inject nvme0 unhang > /dev/null || fail "inject unhang"
check1 hang
echo "measure: hang: nvme0 state $(ctl_state), timeouts=$(rstat timeouts) resets=$(rstat resets_started)"
stop0
[ "$(ctl_state)" = failed ] && { ctl attach --wait nvme0 || fail "attach after a failed reset"; }
wait_state live 30
dd_cmp || fail "dd + cmp on nvme0 after the hang"

# ---- 2. reset loop ----
r0=$(rstat resets_started)
load0
stalling
read1 resets
fault_begin
ctl inject nvme0 delay $((IO_TIMEOUT + 500)) > /dev/null || fail "inject delay"
sleep 30
fault_end resets
ctl inject nvme0 delay 0 > /dev/null || fail "inject delay 0"
check1 resets
n=$(($(rstat resets_started) - r0))
echo "measure: resets: nvme0 reset $n times, failed_after_retries=$(rstat failed_after_retries)"
[ "$n" -ge 2 ] || fail "resets: nvme0 was reset $n times, not again and again"
stop0
if [ "$(ctl_state)" = failed ]; then
	echo "the reset failed while delayed: attach"
	ctl attach --wait nvme0 || fail "attach after a failed reset"
fi
wait_state live 30
dd_cmp || fail "dd + cmp on nvme0 after the resets"
fault_stop
finish
