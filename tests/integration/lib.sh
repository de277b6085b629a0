# lib.sh - shared set-up of the FUSE integration tests (sourced, POSIX sh).
#
#   . "$(dirname "$0")/lib.sh"
#   lib_init                     root, /dev/fuse and the binary, or exit 77;
#                                TMP (removed at exit), MNT, CONF, LOG
#   lib_init_ctl                 lib_init, and $C, python3; VERSION
#   conf_write <<EOF ... EOF     CONF = [daemon] + [engine] from the variables
#                                below, then stdin (the [controller] sections)
#   conf_sim NAME SIZE [KEY=VALUE...] [-- NAME SIZE [KEY=VALUE...]]...
#                                conf_write with those software controllers:
#                                [controller NAME], device = sim, size =
#                                SIZE, then each KEY = VALUE
#   sim_section ARGS...          print those sections (as conf_sim takes
#                                them), for a config written by hand
#   daemon_start NAME...         start nvmefsd -f -c CONF, wait until every
#                                $MNT/NAME exists (30 s), or fail
#   daemon_stop                  SIGTERM, wait; DAEMON_RC is its exit status
#   daemon_stop_ok [WHAT]        daemon_stop, and fail unless it exited 0
#   completed                    requests the engine completed so far
#   wait_io FROM N               until N more than FROM completed (30 s)
#   ctl ARGS...                  $C (nvmefsctl) on the daemon's admin socket,
#                                ended after CTL_TIMEOUT (60) seconds
#   json [FILE] EXPR             print a Python expression over the JSON d
#                                read from FILE (or stdin)
#   ctl_forms "CMD ARGS"...      each in human and --json form: exit 0, no
#                                stderr, JSON with ok; kept as $TMP/h_NAME,
#                                $TMP/j_NAME
#   sim_stat CTRL KEY            a counter of the sim's stats line (SIGUSR1)
#   wait_until SECONDS CMD...    until CMD succeeds, at most SECONDS, or fail
#   fuse_mounted                 true while a FUSE file system is on $MNT
#   tool NAME                    the path of $BUILD/tools/NAME, or FAIL
#   helper_run NAME SECONDS      a helper serving $MNT itself: exit 0 in time,
#                                nothing left mounted
#   loop_file SIZE BLOCK         LOOP_DEV over $TMP/loop.img, detached at exit
#   fail MSG / finish            count a failure / exit 0 or 1
# Variables for conf_write: MODE (hybrid), QUEUES (1), CPUS (0), QD (64),
# LOG_LEVEL (info), FILE_MODE (0660), FILE_GROUP (0), ALLOW_OTHER (yes),
# IO_TIMEOUT (5000), FUSE_TRANSPORT (auto; run.sh's integration suite sets
# classic, integration-uring sets uring, and daemon_start then also waits
# for the daemon to say it serves over io_uring), FUSE_QD (16: entries per
# FUSE queue over io_uring), DAEMON_EXTRA (more [daemon] lines),
# DMA_ISOLATION (controller), ENGINE_EXTRA (more [engine] lines).
# The daemon is the audit build, $BUILD/nvmefsd-audit (src/fuse/audit.h:
# every read answer checked against the last write of its blocks, buffers
# and answers accounted for), unless NVMEFS_AUDIT=0 or it was not built:
# daemon_start checks that it says so, and daemon_stop and finish fail the
# test on any "audit: VIOLATION" in $LOG (audit_check).
# NVMEFS_STRACE_DIR=dir (opt-in): every nvmefsd run goes through
# scripts/strace-exec, which leaves a summary of its system calls in dir
# (scripts/syscalls-union lists them; systemd/syscalls.txt is that list).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
D=$BUILD/nvmefsd
AUDIT=0
if [ "${NVMEFS_AUDIT:-1}" != 0 ] && [ -x "$BUILD/nvmefsd-audit" ]; then
	D=$BUILD/nvmefsd-audit
	AUDIT=1
fi
C=$BUILD/nvmefsctl
FAILS=0

# tool NAME: the path of a program of tests/helpers or bench ($BUILD/tools),
# or the test fails (FAIL, exit 1) when it was not built
tool() {
	[ -x "$BUILD/tools/$1" ] || { echo "FAIL: no $BUILD/tools/$1 (make)" >&2; exit 1; }
	echo "$BUILD/tools/$1"
}

# strace_wrap PROGRAM: the path of a program that runs PROGRAM under
# scripts/strace-exec into $NVMEFS_STRACE_DIR (the wrapper lives there)
strace_wrap() {
	w=$NVMEFS_STRACE_DIR/$(basename "$1")
	mkdir -p "$NVMEFS_STRACE_DIR"
	printf '#!/bin/sh\nexec "%s" "%s" "%s" "$@"\n' "$ROOT/scripts/strace-exec" \
		"$NVMEFS_STRACE_DIR" "$1" > "$w.$$"
	chmod +x "$w.$$"
	mv "$w.$$" "$w"
	echo "$w"
}
[ -z "${NVMEFS_STRACE_DIR:-}" ] || D=$(strace_wrap "$D")
DPID=
DAEMON_RC=

fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

skip() {
	echo "SKIP: $*"
	exit 77
}

lib_cleanup() {
	if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
		kill -9 "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
	fi
	if [ -n "${MNT:-}" ]; then
		umount -l "$MNT" 2>/dev/null
	fi
	[ -n "${LOOP_DEV:-}" ] && losetup -d "$LOOP_DEV" 2>/dev/null
	[ -n "${TMP:-}" ] && rm -rf "$TMP"
}

lib_init() {
	[ "$(id -u)" = 0 ] || skip "needs root (mounts FUSE)"
	[ -c /dev/fuse ] || skip "no /dev/fuse"
	[ -x "$D" ] || { echo "FAIL: no $D (make)"; exit 1; }
	TMP=$(mktemp -d /tmp/nvmefs-test.XXXXXX)
	chmod 755 "$TMP"
	MNT=$TMP/mnt
	CONF=$TMP/nvmefs.conf
	LOG=$TMP/daemon.log
	: > "$LOG"
	trap lib_cleanup EXIT
	trap 'exit 1' INT
	trap 'lib_hung; exit 1' TERM USR1
}

# lib_init_ctl: lib_init for a test of nvmefsctl: $C built, python3 there
# (to read its JSON), VERSION the one the Makefile builds (debian/changelog's
# newest entry)
lib_init_ctl() {
	lib_init
	[ -x "$C" ] || { echo "FAIL: no $C (make)"; exit 1; }
	command -v python3 > /dev/null || skip "python3 is needed to check the JSON"
	VERSION=$(head -n 1 "$ROOT/debian/changelog" | cut -d ' ' -f 2 | tr -d '()')
}

# run.sh's timeout ends a hung script with SIGUSR1 to its whole process
# group (the daemon logs a stats line and goes on; dd, cmp and the like
# die): first, what everything was waiting on
lib_hung() {
	echo "FAIL: ended by a signal (SCRIPT_TIMEOUT: a hang?): the state at that moment"
	ps -eo pid,ppid,stat,wchan:28,etime,args 2>/dev/null |
		grep -E 'nvmefsd|fdstore|fio|dd |cmp|qemu| sh ' | grep -v -E 'grep|kthreadd' | head -n 30
	for p in $(pgrep -f "$D" 2>/dev/null); do
		for t in /proc/"$p"/task/*; do
			echo "thread $(basename "$t") $(cat "$t/comm" 2>/dev/null):" \
				"$(tr '\n' ' ' < "$t/stack" 2>/dev/null | cut -c 1-200)"
		done
	done
	grep -E ' - fuse' /proc/self/mountinfo
	for c in /sys/fs/fuse/connections/*; do
		[ -e "$c/waiting" ] && echo "fuse connection $(basename "$c"): $(cat "$c/waiting") waiting"
	done
	echo "daemon log:"
	tail -n 40 "$LOG"
}

conf_write() {
	{
		cat <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $TMP/admin.sock
file_mode = ${FILE_MODE:-0660}
file_owner = 0
file_group = ${FILE_GROUP:-0}
allow_other = ${ALLOW_OTHER:-yes}
log_level = ${LOG_LEVEL:-info}
fuse_transport = ${FUSE_TRANSPORT:-auto}
fuse_queue_depth = ${FUSE_QD:-16}
${DAEMON_EXTRA:-}
[engine]
queues = ${QUEUES:-1}
cpus = ${CPUS:-0}
mode = ${MODE:-hybrid}
queue_depth = ${QD:-64}
io_timeout_ms = ${IO_TIMEOUT:-5000}
dma_isolation = ${DMA_ISOLATION:-controller}
${ENGINE_EXTRA:-}
EOF
		cat
	} > "$CONF"
}

# wait_until SECONDS CMD...: run CMD every 0.1 s until it succeeds (0), or
# fail (1) once SECONDS have passed on the clock: a wait for a condition,
# with a bound generous enough for a busy machine
wait_until() {
	wu_end=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -ge $wu_end ] && return 1
		sleep 0.1
	done
	return 0
}

sim_section() {
	while [ $# -ge 2 ]; do
		printf '[controller %s]\ndevice = sim\nsize = %s\n' "$1" "$2"
		shift 2
		while [ $# -gt 0 ] && [ "$1" != -- ]; do
			printf '%s = %s\n' "${1%%=*}" "${1#*=}"
			shift
		done
		[ $# -gt 0 ] && shift
	done
}

conf_sim() {
	sim_section "$@" | conf_write
}

ctl() {
	timeout "${CTL_TIMEOUT:-60}" "$C" -s "$TMP/admin.sock" "$@"
}

# ctl_forms "CMD ARGS"...: each command in human form and with --json: exit
# 0, something on stdout, nothing on stderr, valid JSON with "ok": true;
# the outputs are kept as $TMP/h_NAME and $TMP/j_NAME (NAME: the command
# with its blanks as _)
ctl_forms() {
	for cf_cmd in "$@"; do
		# shellcheck disable=SC2086
		ctl $cf_cmd > "$TMP/human" 2> "$TMP/err" || fail "$cf_cmd: exit $?: $(cat "$TMP/err")"
		[ -s "$TMP/human" ] || fail "$cf_cmd: printed nothing"
		[ -s "$TMP/err" ] && fail "$cf_cmd: wrote to stderr: $(cat "$TMP/err")"
		# shellcheck disable=SC2086
		ctl $cf_cmd --json > "$TMP/json" 2> "$TMP/err" || fail "$cf_cmd --json: exit $?: $(cat "$TMP/err")"
		python3 -m json.tool "$TMP/json" > /dev/null 2>&1 ||
			fail "$cf_cmd --json: not JSON: $(head -c 300 "$TMP/json")"
		[ "$(json "$TMP/json" 'd["ok"]')" = True ] || fail "$cf_cmd --json: ok is not true"
		cf_name=$(echo "$cf_cmd" | tr ' ' '_')
		cp "$TMP/human" "$TMP/h_$cf_name"
		cp "$TMP/json" "$TMP/j_$cf_name"
	done
}

json() {
	if [ $# = 1 ]; then
		python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
	else
		python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
	fi
}

daemon_alive() {
	[ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null
}

# daemon_start NAME... : every NAME must appear in the mount
daemon_start() {
	echo "--- start $(date +%T)" >> "$LOG"
	# this daemon's lines, not an earlier one's: a dead mount left by the
	# last run keeps showing its file from the kernel's cache for a while
	ds_serving=$(grep -c "fuse: serving over" "$LOG")
	ds_audit=$(grep -c "audit: on" "$LOG")
	"$D" -f -c "$CONF" >> "$LOG" 2>&1 &
	DPID=$!
	ds_end=$(($(date +%s) + 30))
	while [ "$(date +%s)" -lt $ds_end ]; do
		ok=1
		# the mount, not a file left in the bare directory
		fuse_mounted || ok=0
		[ "$(grep -c "fuse: serving over" "$LOG")" -gt "$ds_serving" ] || ok=0
		for n in "$@"; do [ -f "$MNT/$n" ] || ok=0; done
		[ $ok = 1 ] && { audit_on && transport_check; return; }
		if ! daemon_alive; then
			wait "$DPID"
			DAEMON_RC=$?
			DPID=
			echo "daemon exited $DAEMON_RC during start-up:"
			tail -n 20 "$LOG"
			return 1
		fi
		sleep 0.1
	done
	echo "namespace files $* did not appear within 30 s:"
	tail -n 20 "$LOG"
	return 1
}

# With FUSE_TRANSPORT=uring the suite is about io_uring: a daemon that
# fell back to /dev/fuse fails the test rather than passing it on classic.
transport_check() {
	[ "${FUSE_TRANSPORT:-auto}" = uring ] || return 0
	wait_until 10 grep -q "fuse: serving over io_uring" "$LOG" && return 0
	echo "the daemon does not serve over io_uring:"
	tail -n 20 "$LOG"
	return 1
}

daemon_stop() {
	DAEMON_RC=
	[ -n "$DPID" ] || return 0
	kill -TERM "$DPID"
	wait "$DPID"
	DAEMON_RC=$?
	DPID=
	audit_check
}

# The audit build (this start of it) says it checks before the mount is
# served.
audit_on() {
	# a test may start another binary (t-unit-hardening: the installed
	# daemon under its sandbox)
	case "$D" in *nvmefsd-audit) ;; *) return 0 ;; esac
	i=0
	while [ $i -lt 100 ]; do
		[ "$(grep -c "audit: on" "$LOG")" -gt "${ds_audit:-0}" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	echo "the audit build does not say it checks:"
	tail -n 20 "$LOG"
	return 1
}

# audit_check [LOG]: fail on each audit violation not reported yet
AUDIT_SEEN=0
audit_check() {
	[ "$AUDIT" = 1 ] || return 0
	ac_n=$(grep -c "audit: VIOLATION" "${1:-$LOG}")
	[ "$ac_n" -gt "$AUDIT_SEEN" ] || return 0
	fail "audit: $((ac_n - AUDIT_SEEN)) violation(s):"
	grep -A 24 "audit: VIOLATION" "${1:-$LOG}" | head -n 60
	AUDIT_SEEN=$ac_n
}

# helper_run NAME SECONDS: a helper that runs the daemon's stack in its own
# process on $MNT: exit 0 within SECONDS, and nothing left mounted
helper_run() {
	hr_bin=$(tool "$1") || exit 1
	timeout "$2" "$hr_bin" "$MNT"
	hr_rc=$?
	[ $hr_rc = 0 ] || fail "$1 exited $hr_rc"
	fuse_mounted && fail "$1 left $MNT mounted"
}

# loop_file SIZE BLOCK: LOOP_DEV, a loop device of BLOCK-byte sectors over a
# file of SIZE bytes ($TMP/loop.img), detached at exit; skips the test
# when there is no loop device to be had
loop_file() {
	command -v losetup >/dev/null || skip "no losetup"
	truncate -s "$1" "$TMP/loop.img"
	LOOP_DEV=$(losetup -f --show --sector-size "$2" "$TMP/loop.img" 2>"$TMP/losetup.err") ||
		skip "no loop device: $(cat "$TMP/losetup.err")"
	[ "$(blockdev --getsize64 "$LOOP_DEV")" = "$1" ] || { fail "loop size"; finish; }
	[ "$(blockdev --getss "$LOOP_DEV")" = "$2" ] || { fail "loop sector size"; finish; }
}

# completed: requests the engine completed so far, all controllers
completed() {
	ctl stats --json | json 'd["totals"]["completed"]'
}

# wait_io FROM N: wait until the engine has completed N requests more than
# FROM (an earlier completed): I/O is under way; fails after 30 s
wait_io() {
	wait_until 30 eval "[ \"\$(completed)\" -ge $(($1 + $2)) ]" && return 0
	fail "no I/O under way within 30 s ($(completed) requests completed, $1 before)"
	return 1
}

daemon_stop_ok() {
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "${1:-daemon}: exit $DAEMON_RC after SIGTERM"
}

fuse_mounted() {
	awk -v m="$MNT" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); break }
		if (t ~ /^fuse/) f = 1 } END { exit !f }' /proc/self/mountinfo
}

# sim_stat CTRL KEY: ask for a stats line, print the value of KEY in it
sim_stat() {
	before=$(grep -c "stats: $1: sim " "$LOG")
	kill -USR1 "$DPID"
	i=0
	while [ $i -lt 50 ]; do
		[ "$(grep -c "stats: $1: sim " "$LOG")" -gt "$before" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	grep "stats: $1: sim " "$LOG" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# fio_verify FILE SECONDS MIB_PER_JOB [JOBS] [QD]: randrw 4K-128K, libaio
# direct, crc32c verify of what each job wrote (its own region), JSON
# output; fails unless every job ran I/O and reports error 0.
fio_verify() {
	command -v fio >/dev/null || { fail "fio missing"; return 1; }
	out=$TMP/fio.json
	env $(fio_env) fio --name=verify --filename="$1" --ioengine=libaio --direct=1 --allow_file_create=0 --rw=randrw \
		--bsrange=4k-128k --iodepth="${5:-16}" --numjobs="${4:-2}" --runtime="$2" \
		--time_based --size="$3M" --offset_increment="$3M" --verify=crc32c --verify_state_save=0 \
		--verify_backlog=64 --verify_fatal=1 --output-format=json --output="$out" \
		> "$TMP/fio.err" 2>&1
	rc=$?
	python3 - "$out" <<'PY'
import json, sys
try:
    t = open(sys.argv[1]).read()
    d = json.loads(t[t.index("{"):])  # fio may print notes before the JSON
except Exception as e:
    print("FAIL: fio output unreadable:", e, repr(open(sys.argv[1]).read()[:300]))
    sys.exit(1)
bad = 0
for j in d["jobs"]:
    r, w = j["read"], j["write"]
    print("fio job %s: error %d, read %d MiB %.0f IOPS, write %d MiB %.0f IOPS" % (
        j["jobname"], j["error"], r["io_bytes"] >> 20, r["iops"], w["io_bytes"] >> 20, w["iops"]))
    if j["error"] != 0 or r["io_bytes"] == 0 or w["io_bytes"] == 0:
        bad += 1
sys.exit(1 if bad else 0)
PY
	prc=$?
	shortio_check
	if [ $rc != 0 ] || [ $prc != 0 ]; then
		cat "$TMP/fio.err"
		fail "fio verify on $1 (fio exit $rc)"
		return 1
	fi
	return 0
}

# fio_env: the environment for a fio run whose every AIO completion of
# another byte count than asked is logged (tests/preload/shortio.c): use as
# `env $(fio_env) fio ...`; shortio_check fails the test on each such line.
fio_env() {
	[ -x "$BUILD/tools/shortio.so" ] || return 0
	echo "LD_PRELOAD=$BUILD/tools/shortio.so NVMEFS_SHORTIO_LOG=$TMP/shortio.log"
}

SHORTIO_SEEN=0
shortio_check() {
	[ -f "$TMP/shortio.log" ] || return 0
	sc_n=$(wc -l < "$TMP/shortio.log")
	[ "$sc_n" -gt "$SHORTIO_SEEN" ] || return 0
	fail "fio: $((sc_n - SHORTIO_SEEN)) completion(s) of another byte count than asked (a short or 0-byte read or write):"
	tail -n +"$((SHORTIO_SEEN + 1))" "$TMP/shortio.log" | head -n 10
	SHORTIO_SEEN=$sc_n
}

finish() {
	audit_check
	shortio_check
	if [ "$FAILS" -gt 0 ]; then
		echo "$FAILS failure(s); daemon log:"
		tail -n 30 "$LOG"
		exit 1
	fi
	echo "all checks passed"
	exit 0
}
