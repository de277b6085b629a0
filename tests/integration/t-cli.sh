#!/bin/sh
# t-cli.sh - nvmefsctl against a running nvmefsd over the software controller:
# every command in human and --json form, counters that move by exactly the
# I/O a dd did, controller state and recovery counters, fault injection
# (inject fail: the next read fails with EIO, the one after works), attach
# refused on a live controller, a user other than root refused, and
# the exit codes.
# transport-independent: nvmefsctl over the admin socket; the counters it checks are the engine's
. "$(dirname "$0")/lib.sh"
lib_init_ctl
# lib_init's TMP is searchable by everyone, so that only the socket's own
# mode keeps others out
SOCK=$TMP/admin.sock
NS=$MNT/nvme0n1
# the admin group: uid/gid 65534 is not in it
FILE_GROUP=root ENGINE_EXTRA="cq_budget = 16" conf_sim nvme0 64M block_size=4096
daemon_start nvme0n1 || { fail "start"; finish; }
PID=$DPID

# ---- every command, human and JSON ----
ctl_forms status stats queues namespaces "identify nvme0" config metrics "stats --prometheus"

grep -q "^nvmefsd $VERSION, pid $PID, up " "$TMP/h_status" || fail "status: no version/pid line: $(head -1 "$TMP/h_status")"
grep -q "^mountpoint *$MNT$" "$TMP/h_status" || fail "status: mountpoint missing"
grep -Eq '^nvme0 +live +sim +sim +hybrid ' "$TMP/h_status" || fail "status: no controller row: $(cat "$TMP/h_status")"
[ "$(json "$TMP/j_status" 'd["controllers"][0]["state"]')" = live ] || fail "status --json: state"
[ "$(json "$TMP/j_status" 'd["controllers"][0]["device"], d["config_file"], d["pid"]')" = "('sim', '$CONF', $PID)" ] ||
	fail "status --json: $(json "$TMP/j_status" 'd["controllers"][0]["device"], d["config_file"], d["pid"]')"
grep -Eq "^nvme0n1 +nvme0 +live +1 +64.0 MiB +4096  $NS$" "$TMP/h_namespaces" || fail "namespaces: $(cat "$TMP/h_namespaces")"
[ "$(json "$TMP/j_namespaces" 'd["namespaces"][0]["state"]')" = live ] || fail "namespaces --json: state"
[ "$(json "$TMP/j_namespaces" 'd["namespaces"][0]["size"]')" = 67108864 ] || fail "namespaces --json: size"
# hybrid mode polls while a command is in flight: its queues have no vector
grep -Eq '^0 +-?[0-9]+ +-?[0-9]+ +nvme0 +1 +- +64 +0$' "$TMP/h_queues" ||
	fail "queues: no row reactor 0 -> nvme0 qid 1, no vector (hybrid), depth 64: $(cat "$TMP/h_queues")"
[ "$(json "$TMP/j_queues" 'len(d["queues"]), d["queues"][0]["qid"], d["queues"][0]["vector"]')" = "(1, 1, None)" ] ||
	fail "queues --json: $(json "$TMP/j_queues" 'd["queues"]')"
grep -q '^model ' "$TMP/h_identify_nvme0" || fail "identify: no model"
grep -q '^ONCS ' "$TMP/h_identify_nvme0" || fail "identify: no ONCS"
[ "$(json "$TMP/j_identify_nvme0" 'd["controller"], d["namespaces"][0]["blocks"]')" = "('nvme0', 16384)" ] ||
	fail "identify --json: $(json "$TMP/j_identify_nvme0" 'd["controller"], d["namespaces"]')"
# the daemon's effective config is what --check-config prints for the same file
"$D" --check-config -c "$CONF" > "$TMP/effective" 2> /dev/null || fail "--check-config failed"
cmp -s "$TMP/effective" "$TMP/h_config" || { fail "config differs from --check-config"; diff "$TMP/effective" "$TMP/h_config"; }
for f in "$TMP/h_metrics" "$TMP/h_stats_--prometheus"; do
	grep -q '^# TYPE nvmefs_qpair_submitted_total counter$' "$f" || fail "$f: no TYPE line"
	grep -Eq '^nvmefs_qpair_completed_total\{controller="nvme0",qid="1",reactor="0"\} [0-9]+$' "$f" ||
		fail "$f: no completed counter"
	grep -q '^# TYPE nvmefs_qpair_latency_seconds histogram$' "$f" || fail "$f: no latency histogram"
done
grep -q '^REACTOR .*SUBMITTED .*COMPLETED' "$TMP/h_stats" || fail "stats: no header"
grep -q '^total ' "$TMP/h_stats" || fail "stats: no total row"
grep -Eq '^nvme0 +live +0 +0 +0 +0 +0 +0 ' "$TMP/h_stats" || fail "stats: no recovery row: $(cat "$TMP/h_stats")"
grep -Eq '^0 +nvme0 +1 +0 +0 +0 +0 +0$' "$TMP/h_stats" || fail "stats: no per-queue recovery row"
[ "$(json "$TMP/j_stats" 'd["controllers"][0]["recovery"]["resets_started"], d["totals"]["timeouts"]')" = "(0, 0)" ] ||
	fail "stats --json: recovery counters"
grep -q '^nvmefs_controller_state{controller="nvme0",state="live"} 1$' "$TMP/h_metrics" || fail "metrics: no state"
grep -q '^nvmefs_controller_resets_started_total{controller="nvme0"} 0$' "$TMP/h_metrics" || fail "metrics: no resets"
grep -q '^nvmefs_qpair_resubmitted_total{controller="nvme0",qid="1",reactor="0"} 0$' "$TMP/h_metrics" ||
	fail "metrics: no per-queue resubmitted"

# ---- counters move by exactly the I/O done ----
snap() { # FILE: totals as "completed submitted bytes_read bytes_written errors"
	ctl stats --json > "$1" || fail "stats --json: exit $?"
	json "$1" '" ".join(str(d["totals"][k]) for k in ("completed", "submitted", "bytes_read", "bytes_written")) + " " + str(d["totals"]["errors"]["total"])'
}
snap "$TMP/s0" > "$TMP/v0"
dd if=/dev/urandom of="$TMP/data" bs=1M count=4 2> /dev/null
dd if="$TMP/data" of="$NS" bs=4k count=1024 oflag=direct conv=notrunc 2> "$TMP/dd" || fail "dd write: $(cat "$TMP/dd")"
snap "$TMP/s1" > "$TMP/v1"
read -r c0 s0 r0 w0 e0 < "$TMP/v0"
read -r c1 s1 r1 w1 e1 < "$TMP/v1"
[ $((c1 - c0)) = 1024 ] || fail "writes completed delta $((c1 - c0)), want 1024"
[ $((s1 - s0)) = 1024 ] || fail "submitted delta $((s1 - s0)), want 1024"
[ $((r1 - r0)) = 0 ] || fail "bytes read delta $((r1 - r0)), want 0"
[ $((w1 - w0)) = 4194304 ] || fail "bytes written delta $((w1 - w0)), want 4194304"
[ "$e0" = "$e1" ] || fail "errors went from $e0 to $e1"

snap "$TMP/s2" > "$TMP/v2"
dd if="$NS" of="$TMP/back" bs=64k count=64 iflag=direct 2> "$TMP/dd" || fail "dd read: $(cat "$TMP/dd")"
snap "$TMP/s3" > "$TMP/v3"
read -r c2 s2 r2 w2 e2 < "$TMP/v2"
read -r c3 s3 r3 w3 e3 < "$TMP/v3"
[ $((c3 - c2)) = 64 ] || fail "reads completed delta $((c3 - c2)), want 64"
[ $((r3 - r2)) = 4194304 ] || fail "bytes read delta $((r3 - r2)), want 4194304"
[ $((w3 - w2)) = 0 ] || fail "bytes written delta $((w3 - w2)), want 0"
[ "$e2" = "$e3" ] || fail "errors went from $e2 to $e3"
cmp -s "$TMP/data" "$TMP/back" || fail "data read back differs"
# the per-qpair view agrees with the totals (one queue here)
[ "$(json "$TMP/s3" 'd["reactors"][0]["qpairs"][0]["completed"] == d["totals"]["completed"]')" = True ] ||
	fail "qpair and totals disagree"

# ---- the FUSE front end: per-operation counts and bytes move by the I/O done ----
fop() { # FILE OP FIELD
	json "$1" 'd["fuse"]["ops"]["'"$2"'"]["'"$3"'"]'
}
[ "$(fop "$TMP/s1" write count)" -ge 1024 ] || fail "fuse write count $(fop "$TMP/s1" write count)"
[ $(($(fop "$TMP/s1" write count) - $(fop "$TMP/s0" write count))) = 1024 ] ||
	fail "fuse writes delta, want 1024"
[ $(($(fop "$TMP/s1" write bytes) - $(fop "$TMP/s0" write bytes))) = 4194304 ] ||
	fail "fuse write bytes delta, want 4194304"
[ $(($(fop "$TMP/s3" read count) - $(fop "$TMP/s2" read count))) = 64 ] ||
	fail "fuse reads delta, want 64"
[ $(($(fop "$TMP/s3" read bytes) - $(fop "$TMP/s2" read bytes))) = 4194304 ] ||
	fail "fuse read bytes delta, want 4194304"
[ "$(json "$TMP/s3" 'd["fuse"]["ops"]["read"]["errors"]')" = 0 ] || fail "fuse read errors"
[ "$(json "$TMP/s3" 'd["fuse"]["inflight"]')" = 0 ] || fail "fuse requests in flight while idle"
[ "$(json "$TMP/s3" 'sorted(d["fuse"]["parked"])')" = "['memory', 'queue_slot', 'range_lock']" ] ||
	fail "fuse parked reasons: $(json "$TMP/s3" 'sorted(d["fuse"]["parked"])')"
[ "$(json "$TMP/s3" 'd["fuse"]["ops"]["write"]["latency_us"]["p50"] <= d["fuse"]["ops"]["write"]["latency_us"]["max"] and d["fuse"]["ops"]["write"]["latency_us"]["max"] > 0')" = True ] ||
	fail "fuse write latency percentiles"
fallocate -p -o 1048576 -l 65536 "$NS" || fail "punch"
fallocate -z -o 0 -l 65536 "$NS" || fail "zero range"
ctl stats --json > "$TMP/s4" || fail "stats --json"
[ $(($(fop "$TMP/s4" punch count) - $(fop "$TMP/s3" punch count))) = 1 ] || fail "fuse punch delta, want 1"
[ $(($(fop "$TMP/s4" punch bytes) - $(fop "$TMP/s3" punch bytes))) = 65536 ] || fail "fuse punch bytes delta"
[ $(($(fop "$TMP/s4" zero count) - $(fop "$TMP/s3" zero count))) = 1 ] || fail "fuse zero delta, want 1"
ctl stats > "$TMP/h_stats2" || fail "stats"
grep -Eq '^FUSE front end over (classic|uring): 0 in flight; parked now: memory 0 queue_slot 0 range_lock 0' "$TMP/h_stats2" ||
	fail "stats: no front-end line: $(cat "$TMP/h_stats2")"
grep -Eq '^punch +[1-9][0-9]* ' "$TMP/h_stats2" || fail "stats: no punch row"
grep -Eq '^write +[0-9]+ ' "$TMP/h_stats2" || fail "stats: no write row"
ctl metrics > "$TMP/m2" || fail "metrics"
grep -Eq '^nvmefs_fuse_requests_total\{op="punch"\} [1-9][0-9]*$' "$TMP/m2" || fail "metrics: no fuse punch count"
grep -q '^nvmefs_fuse_inflight 0$' "$TMP/m2" || fail "metrics: no fuse inflight"
grep -q '^# TYPE nvmefs_fuse_request_latency_seconds histogram$' "$TMP/m2" || fail "metrics: no fuse latency histogram"
grep -Eq '^nvmefs_fuse_parked\{reason="range_lock"\} 0$' "$TMP/m2" || fail "metrics: no fuse parked"
# ---- inject and attach ----
ctl inject nvme0 fail 1 0x4281 > "$TMP/out" 2>&1 || fail "inject fail: $(cat "$TMP/out")"
grep -q '^nvme0: fail next 1 command(s) with status 0x4281 injected; controller live$' "$TMP/out" ||
	fail "inject fail: $(cat "$TMP/out")"
dd if="$NS" of=/dev/null bs=4k count=1 iflag=direct 2> "$TMP/dd" && fail "read after inject fail succeeded"
grep -q "Input/output error" "$TMP/dd" || fail "read after inject fail: $(cat "$TMP/dd")"
dd if="$NS" of=/dev/null bs=4k count=1 iflag=direct 2> "$TMP/dd" || fail "the read after that failed: $(cat "$TMP/dd")"
ctl --json inject nvme0 delay 0 > "$TMP/json" || fail "inject delay 0"
[ "$(json "$TMP/json" 'd["fault"], d["ms"], d["state"]')" = "('delay', 0, 'live')" ] || fail "inject --json: $(cat "$TMP/json")"
ctl attach nvme0 > "$TMP/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "attach of a live controller: exit $rc, want 1"
grep -q "nvme0 is live, not removed" "$TMP/out" || fail "attach of a live controller: $(cat "$TMP/out")"
grep -q "fault injected into nvme0: fail" "$LOG" || fail "the injection is not logged"

# ---- stats -w: rates until Ctrl-C ----
timeout --preserve-status -s INT 2.5 "$C" -s "$SOCK" stats -w 1 > "$TMP/watch" 2>&1
rc=$?
[ $rc = 0 ] || fail "stats -w ended by SIGINT: exit $rc, want 0: $(cat "$TMP/watch")"
[ "$(grep -c '^REACTOR .*IOPS' "$TMP/watch")" -ge 1 ] || fail "stats -w: no interval printed: $(cat "$TMP/watch")"
grep -Eq '^0 +nvme0 +1 ' "$TMP/watch" || fail "stats -w: no qpair row"

# ---- who may connect ----
cp "$C" "$TMP/nvmefsctl" && chmod 755 "$TMP/nvmefsctl"
setpriv --reuid=65534 --regid=65534 --clear-groups "$TMP/nvmefsctl" -s "$SOCK" status > "$TMP/out" 2> "$TMP/err"
rc=$?
[ $rc = 3 ] || fail "non-group user: exit $rc, want 3"
grep -q "access denied" "$TMP/err" || fail "non-group user: no 'access denied': $(cat "$TMP/err")"
[ "$(stat -c '%a %U' "$SOCK")" = "600 root" ] || fail "socket mode/owner: $(stat -c '%a %U' "$SOCK")"
# without admin_group the socket is root's alone: group 0 does not help
setpriv --reuid=65534 --regid=65534 --groups=0 "$TMP/nvmefsctl" -s "$SOCK" status > /dev/null 2> "$TMP/err"
rc=$?
[ $rc = 3 ] || fail "group 0 member without admin_group: exit $rc, want 3"
# (the users and groups policy: t-admin-users)

# ---- exit codes ----
expect() { # WANT PATTERN ARGS...: exit status and a pattern on stdout+stderr
	want=$1 pat=$2
	shift 2
	"$C" "$@" > "$TMP/out" 2>&1
	rc=$?
	[ $rc = "$want" ] || fail "nvmefsctl $*: exit $rc, want $want"
	grep -q -- "$pat" "$TMP/out" || fail "nvmefsctl $*: no '$pat' in: $(cat "$TMP/out")"
}
expect 0 "^Usage: " --help
expect 0 "^nvmefsctl $VERSION$" --version
expect 2 "no command given"
expect 2 "unknown command 'frobnicate'" -s "$SOCK" frobnicate
expect 2 "identify needs a CONTROLLER" -s "$SOCK" identify
expect 2 "unexpected argument" -s "$SOCK" status extra
expect 2 "go with stats only" -s "$SOCK" queues -w 1
expect 2 "seconds from" -s "$SOCK" stats -w 0
expect 1 'no controller named "nope"' -s "$SOCK" identify nope
expect 2 "inject needs a CONTROLLER" -s "$SOCK" inject
expect 2 "inject needs a CONTROLLER and a FAULT" -s "$SOCK" inject nvme0
expect 2 "unknown fault 'melt'" -s "$SOCK" inject nvme0 melt
expect 2 "inject delay takes MS" -s "$SOCK" inject nvme0 delay
expect 2 "inject hang takes no argument" -s "$SOCK" inject nvme0 hang 5
expect 2 "milliseconds from 0" -s "$SOCK" inject nvme0 delay soon
expect 2 "an NVMe status" -s "$SOCK" inject nvme0 fail 1 0
expect 2 "inject powerfail takes \\[SEED\\]" -s "$SOCK" inject nvme0 powerfail 1 2
expect 2 "SEED soon: 0" -s "$SOCK" inject nvme0 powerfail soon
expect 2 "attach needs a CONTROLLER" -s "$SOCK" attach
expect 1 'no controller named "nope"' -s "$SOCK" inject nope hang
expect 1 'no controller named "nope"' -s "$SOCK" attach nope
expect 3 "no such socket" -s "$TMP/none.sock" status
python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$TMP/stale.sock"
expect 3 "nobody listens" -s "$TMP/stale.sock" status
expect 0 "^nvmefsd $VERSION" -c "$CONF" status

# the daemon still serves after all that, and stops cleanly
ctl status > /dev/null || fail "daemon stopped answering"
daemon_stop_ok
[ -e "$SOCK" ] && fail "admin socket left behind after a clean stop"
echo "nvmefsctl: every command, counters, permissions and exit codes checked"
finish
