# sched-lib.sh - helpers of the scheduler integration tests (sourced after
# tests/integration/lib.sh; POSIX sh).
#
#   fuse_stat KEY           a counter of the front end's scheduler stats line
#                           (SIGUSR1: "stats: sched inflight=...")
#   fio_deadline SECS ARGS  run fio ARGS (JSON output to $TMP/fio.json); if it
#                           has not ended within SECS, fail, kill the daemon
#                           with SIGKILL (which fails its requests, so fio can
#                           end) and return 1.  Else return fio's status.
#   fio_json_ok             every job of $TMP/fio.json: error 0 and I/O done
#   mix_verify FILE SECS [FIO ARGS]  the overlapping mix: 512..1M writes at
#                           512-byte alignment, QD 256, libaio direct, on the
#                           first 8 MiB, then crc32c verify; under a deadline
#
# The mix: on a namespace of 4 KiB blocks, writes at 512-byte offsets share
# blocks with their neighbours (read-modify-write under the range lock) and
# run together.  A few 512-byte writes are in the mix so that fio's random
# map has the alignment's granularity: each byte is written once per pass
# (with a 1 KiB smallest size fio would let writes overlap by 512 bytes and
# drop the overwritten ones from its verify log), so every write is
# verified.

fuse_stat() {
	before=$(grep -c "stats: sched inflight=" "$LOG")
	kill -USR1 "$DPID"
	i=0
	while [ $i -lt 50 ]; do
		[ "$(grep -c "stats: sched inflight=" "$LOG")" -gt "$before" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	grep "stats: sched inflight=" "$LOG" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}

fio_deadline() {
	secs=$1
	shift
	env $(fio_env) fio "$@" --output-format=json --output="$TMP/fio.json" > "$TMP/fio.err" 2>&1 &
	fpid=$!
	t=0
	while kill -0 "$fpid" 2>/dev/null; do
		if [ "$t" -ge $((secs * 10)) ]; then
			fail "fio still running after ${secs}s: requests hang (daemon state follows)"
			kill -USR1 "$DPID" 2>/dev/null
			sleep 0.5
			grep -E "stats: (fuse|sched) " "$LOG" | tail -n 2
			kill -9 "$DPID" 2>/dev/null
			wait "$DPID" 2>/dev/null
			DPID=
			wait "$fpid" 2>/dev/null
			return 1
		fi
		sleep 0.1
		t=$((t + 1))
	done
	wait "$fpid"
}

fio_json_ok() {
	python3 - "$TMP/fio.json" <<'PY'
import json, sys
try:
    t = open(sys.argv[1]).read()
    d = json.loads(t[t.index("{"):])
except Exception as e:
    print("FAIL: fio output unreadable:", e)
    sys.exit(1)
bad = 0
for j in d["jobs"]:
    w, r = j["write"], j["read"]
    print("fio job %s: error %d, wrote %d KiB (%d ios), read %d KiB" % (
        j["jobname"], j["error"], w["io_bytes"] >> 10, w["total_ios"], r["io_bytes"] >> 10))
    if j["error"] != 0 or w["io_bytes"] == 0:
        bad += 1
sys.exit(1 if bad else 0)
PY
}

mix_verify() {
	f=$1 secs=$2
	shift 2
	if ! fio_deadline "$secs" --name=mix --filename="$f" --ioengine=libaio --direct=1 \
		--rw=randwrite --bssplit=512/5:1k/20:3k/20:4k/20:9k/15:64k/10:300k/5:1m/5 \
		--ba=512 --iodepth=256 --size=8m --verify=crc32c --verify_fatal=1 \
		--verify_state_save=0 "$@"; then
		cat "$TMP/fio.err"
		fail "fio mix on $f"
		return 1
	fi
	fio_json_ok || { cat "$TMP/fio.err"; fail "fio mix on $f: errors"; return 1; }
	return 0
}
