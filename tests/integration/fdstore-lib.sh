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
