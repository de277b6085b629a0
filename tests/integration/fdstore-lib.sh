# fdstore-lib.sh - nvmefsd under tests/helpers/fdstore (a stand-in of
# systemd's fd store and restart), for the tests of crash adoption.  Source
# it after lib.sh's lib_init; F is the fdstore helper, SPID its pid, DPID
# the daemon's (fdstore writes it to $TMP/pid at every start), STORE_BIN
# the daemon binary it starts ($D unless set).
F=$BUILD/tools/fdstore
[ -x "$F" ] || { echo "FAIL: no $F (make)"; exit 1; }
SPID=
trap 'if [ -n "$SPID" ]; then kill -9 "$SPID" 2>/dev/null; fi; lib_cleanup' EXIT

# wait_for PATTERN COUNT SECONDS: until PATTERN is in LOG COUNT times
wait_for() {
	i=0
	while [ "$(grep -c -- "$1" "$LOG")" -lt "$2" ]; do
		i=$((i + 1))
		[ $i -gt $(($3 * 10)) ] && return 1
		sleep 0.1
	done
	return 0
}

# store_start [fdstore options]: nvmefsd under fdstore; DPID is its pid
store_start() {
	echo "--- fdstore $* $(date +%T)" >> "$LOG"
	rm -f "$TMP/pid"
	n0=$(grep -c "fdstore: stored fuse-state" "$LOG")
	"$F" -p "$TMP/pid" -s "$TMP/notify" "$@" -- "${STORE_BIN:-$D}" -f -c "$CONF" >> "$LOG" 2>&1 &
	SPID=$!
	wait_for "fdstore: stored fuse-state" $((n0 + 1)) 10 ||
		{ fail "nothing stored within 10 s"; tail -n 20 "$LOG"; return 1; }
	DPID=$(cat "$TMP/pid")
}

# store_stop: SIGTERM to fdstore (passed on, no restart)
store_stop() {
	[ -n "$SPID" ] || return 0
	kill -TERM "$SPID"
	wait "$SPID"
	SRC=$?
	SPID= DPID=
}

# store_finish: store_stop, which must end with 0 and unmounted, no run of
# the daemon having failed or a sanitizer having spoken; then finish
store_finish() {
	store_stop
	[ "$SRC" = 0 ] || fail "stop: exit $SRC"
	fuse_mounted && fail "still mounted after the stop"
	grep -E "fdstore: pid [0-9]+ exited [1-9]" "$LOG" && fail "a run failed"
	grep -E "Sanitizer|runtime error" "$LOG" && fail "sanitizer report"
	finish
}

# mnt_state: the FUSE mounts on $MNT (connection, type, alive or not) and
# what the daemon logged of aborting and detaching, for a failure message
mnt_state() {
	awk -v m="$MNT" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { print $3, $(i + 1); break } }' \
		/proc/self/mountinfo | while read -r dev t; do
		c=${dev#0:}
		if [ -d /sys/fs/fuse/connections/"$c" ]; then a=alive; else a=dead; fi
		printf '%s ' "mount of connection $c ($t, $a);"
	done
	grep -E "aborted, [0-9]+ mount|cannot unmount|cannot abort|nobody serves" "$LOG" | tail -n 2 | tr '\n' ' '
}

# files_within SECONDS PATH: PATH appears (the daemon did not hang)
files_within() {
	i=0
	while [ ! -f "$2" ]; do
		i=$((i + 1))
		[ $i -gt $(($1 * 10)) ] && return 1
		sleep 0.1
	done
}

# new_pid: the pid fdstore started after the one in DPID
new_pid() {
	i=0
	while [ "$(cat "$TMP/pid" 2>/dev/null)" = "$DPID" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	DPID=$(cat "$TMP/pid")
}

# resent_now: add to $resent what the running image was resent (the
# resent= figure of the stats: fuse line SIGUSR1 has it log)
resent_now() {
	before=$(grep -c "stats: fuse " "$LOG")
	kill -USR1 "$DPID"
	wait_for "stats: fuse " $((before + 1)) 5 || fail "no stats line"
	r=$(grep "stats: fuse " "$LOG" | tail -n 1 | tr ' ' '\n' | sed -n 's/^resent=//p')
	resent=$((resent + ${r:-0}))
}

# fio_start NAME RATE_KIB SECONDS: fio in the background (FP its pid) writes
# 48 MiB at random (4k to 128k, libaio, direct, iodepth 32) at RATE_KIB KiB/s
# with crc32c headers and verifies them after; killed after SECONDS, so a
# request nobody resends cannot hold it for good.  Output in $TMP/fio.json
# and $TMP/fio.err.
fio_start() {
	# never a plain file in the mountpoint directory once unmounted (fault-lib.sh)
	timeout -k 5 "$3" env $(fio_env) fio --name="$1" --filename="$MNT/nvme0n1" --ioengine=libaio --direct=1 \
		--allow_file_create=0 --iodepth=32 --bssplit=4k/40:16k/30:64k/20:128k/10 --rw=randwrite --size=48M \
		--verify=crc32c --rate=,"$2"k --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
		--randseed=$((SEED + 1000)) --output-format=json --output="$TMP/fio.json" \
		> "$TMP/fio.err" 2>&1 &
	FP=$!
}

# fio_cycles NAME N CYCLE_TENTHS BASE_TENTHS ACTION: fio_start NAME at a
# rate that makes its write phase last about N x CYCLE_TENTHS +
# BASE_TENTHS tenths of a second (what N actions take here), then N times:
# a delay of 0.3 to 1.2 s from SEED, fail if fio has ended, and ACTION K
# (K = 1..N; it stops the cycles by returning 1); then fio_check.  K is
# how many actions ran.  The block the crash (kill -9) and upgrade
# (restart) tests share.
fio_cycles() {
	fc_rate=$((48 * 1024 * 10 / ($2 * $3 + $4)))
	fc_delays=$(awk -v s="$SEED" -v n="$2" \
		'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%.2f ", 0.3 + rand() * 0.9 }')
	fio_start "$1" "$fc_rate" $((60 + $2 * 5))
	K=0
	for fc_t in $fc_delays; do
		sleep "$fc_t"
		kill -0 "$FP" 2>/dev/null || { fail "fio ended before action $((K + 1)) (make it longer)"; break; }
		K=$((K + 1))
		"$5" $K || break
	done
	fio_check
}

# fio_check: wait for fio_start's fio; fail unless it exited 0 with error 0,
# wrote and verified all 48 MiB and said nothing of verify or errors
fio_check() {
	wait "$FP"
	frc=$?
	shortio_check
	python3 - "$TMP/fio.json" <<'PY' || fail "fio"
import json, sys
t = open(sys.argv[1]).read()
d = json.loads(t[t.index("{"):])
j = d["jobs"][0]
w, r = j["write"], j["read"]
print("fio: error %d, wrote %d MiB, verified %d MiB; longest completion: write %.1f ms, read %.1f ms"
      % (j["error"], w["io_bytes"] >> 20, r["io_bytes"] >> 20, w["clat_ns"]["max"] / 1e6,
         r["clat_ns"]["max"] / 1e6))
sys.exit(j["error"] != 0 or w["io_bytes"] != 48 << 20 or r["io_bytes"] != 48 << 20)
PY
	[ $frc = 0 ] || { fail "fio exit $frc"; cat "$TMP/fio.err"; }
	if grep -Eiq "verify|not connected|error" "$TMP/fio.err"; then
		fail "fio: $(cat "$TMP/fio.err")"
	fi
}
