# fault-lib.sh - shared by the t-fault-*.sh tests (sourced after lib.sh):
# nvmefsd over the threaded software controller with a short io_timeout_ms,
# faults injected with nvmefsctl while fio verifies, and the checks and
# measurements every fault test makes.  Every wait has a deadline: a hang
# fails the test instead of blocking it.
#
#   fault_init             lib_init, the tools, fault_cleanup at exit (for
#                          a test that writes its own config)
#   fault_start            fault_init, conf (IO_TIMEOUT 400 ms, exec = FAULT_EXEC
#                          (default thread), offload = FAULT_OFFLOAD (0),
#                          64 MiB; FAULT_CTRLS controllers nvme0, nvme1, ...,
#                          default 1)
#                          + start; F is nvme0's namespace file
#   ctl_state              the controller's state (live/resetting/removed/failed)
#   wait_state STATE SECS  poll until the state is STATE, else fail
#   fio_start SECS         fio randrw crc32c verify_fatal on the first 32 MiB,
#                          in the background (FIO_PID), hard deadline SECS + 60;
#                          FIO_EXTRA: more fio options (e.g. --verify_dump=1)
#   fio_running            wait until that fio has I/O completed (64 requests)
#   fault_fio SECS         baseline dd_cmp, fio_start SECS, fio_running,
#                          probe_start: the moment to inject a fault
#   fio_err_spent          fail unless fio's error is 0, or EIO explained by
#                          spent retries or a reset that held commands too long
#   fio_wait               wait for it; FIO_ERR = fio's error (0, 5 = EIO, ...);
#                          fails on any verify mismatch whatever the error,
#                          and on any completion of another byte count than
#                          asked (lib.sh's fio_env, shortio_check);
#                          FIO_KEEP=dir: on a mismatch fio's output, its dumps
#                          and the daemon log are copied there
#   probe_start / probe_stop  4 KiB O_DIRECT reads at 60 MiB every 50 ms into
#                          $TMP/probe ("ms rc" lines, ms since the epoch)
#   probe_gap T0_MS        ms from T0_MS to the first successful probe read
#                          that started after T0_MS ("none" if none)
#   dd_cmp                 4 MiB written with dd O_DIRECT, read back, cmp
#   rstat KEY              a recovery counter of the controller (stats --json)
#   sim_offloaded          commands the software controller's copy thread
#                          executed (its counters, logged on SIGUSR1); "none"
#   now_ms                 ms since the epoch
#   stop_within SECS       SIGTERM, wait at most SECS; STOP_MS, DAEMON_RC
#   fault_stop             stop_within 30, exit 0, unmounted
. "$(dirname "$0")/lib.sh"
F=
FIO_PID=
PROBE_PID=
FIO_ERR=

now_ms() { echo $(($(date +%s%N) / 1000000)); }

fault_init() {
	lib_init
	trap fault_cleanup EXIT
	[ -x "$C" ] || { echo "FAIL: no $C (make)"; exit 1; }
	command -v fio >/dev/null || skip "no fio"
	command -v python3 >/dev/null || skip "no python3"
}

fault_start() {
	fault_init
	fs_n=0 fs_names=
	while [ $fs_n -lt "${FAULT_CTRLS:-1}" ]; do
		fs_names="$fs_names nvme${fs_n}n1"
		fs_n=$((fs_n + 1))
	done
	for fs_c in $fs_names; do
		sim_section "${fs_c%n1}" 64M namespaces=1 block_size=4096 backing=ram \
			"exec=${FAULT_EXEC:-thread}" "offload=${FAULT_OFFLOAD:-0}"
	done | IO_TIMEOUT=${IO_TIMEOUT:-400} conf_write
	# one name per controller: split on purpose
	daemon_start $fs_names || { fail "start"; finish; }
	F=$MNT/nvme0n1
}

ctl_state() {
	ctl status --json 2>/dev/null | json 'd["controllers"][0]["state"]' 2>/dev/null
}

wait_state() {
	ws_end=$(($(now_ms) + $2 * 1000))
	while [ "$(now_ms)" -lt $ws_end ]; do
		[ "$(ctl_state)" = "$1" ] && return 0
		sleep 0.05
	done
	fail "state not $1 within $2 s (it is $(ctl_state))"
	return 1
}

rstat() {
	ctl stats --json | json "d['controllers'][0]['recovery']['$1']"
}

sim_offloaded() {
	kill -USR1 "$DPID" 2> /dev/null
	sleep 0.5
	so=$(grep -o 'offloaded=[0-9]*' "$LOG" | tail -n 1 | cut -d= -f2)
	echo "${so:-none}"
}

# fio_running: wait until fio_start's fio has had 64 requests completed
# (a fault injected then finds its I/O in flight); fails after 30 s
fio_running() {
	wait_io "$FIO_C0" 64
}

# fault_fio SECS: the baseline dd + cmp, fio_start SECS and fio_running,
# then the probes.  A fio that has ended already (its first commands timed
# out on a busy machine, and a reset failed them) is said, not failed: the
# fault then meets the probes alone
fault_fio() {
	dd_cmp || fail "baseline dd + cmp"
	fio_start "$1"
	fio_running
	kill -0 "$FIO_PID" 2>/dev/null ||
		echo "note: fio ended before the fault (its error is below)"
	probe_start
}

# fio_err_spent: fio ended without an error, or with EIO only because
# commands ran out of their retries (failed_after_retries counts them) or
# were held by a reset past io_timeout_ms (a reset a busy machine makes
# long: the daemon logs each "held N ms by a reset: failed")
fio_err_spent() {
	case $FIO_ERR in
	0) ;;
	5) [ "$(rstat failed_after_retries)" -gt 0 ] || grep -q "held [0-9]* ms by a reset: failed" "$LOG" ||
		fail "fio got EIO but no command failed after its retries or was held past its timeout" ;;
	*) fail "fio error $FIO_ERR (only EIO from spent retries or a long reset is allowed)" ;;
	esac
}

fio_start() {
	FIO_C0=$(completed)
	rm -f "$TMP/fio.json" "$TMP/fio.err"
	rm -f "$TMP"/*.received "$TMP"/*.expected
	# in TMP: verify_dump leaves its files in the working directory
	cd "$TMP" || return
	# --allow_file_create=0: with time_based fio closes and reopens the file
	# by its path at each pass over its region; once a stop has unmounted,
	# that path is the bare mountpoint directory, where fio would create a
	# plain file and go on against it (reads past its end answer nothing:
	# verify "mismatches" against what fio wrote through the mount)
	timeout -s KILL $(($1 + 60)) env $(fio_env) fio --name=verify --filename="$F" --ioengine=libaio \
		--allow_file_create=0 --direct=1 --rw=randrw --bsrange=4k-64k --iodepth=8 --numjobs=2 \
		--runtime="$1" --time_based --size=16M --offset_increment=16M \
		--verify=crc32c --verify_backlog=32 --verify_fatal=1 --verify_state_save=0 \
		--output-format=json --output="$TMP/fio.json" ${FIO_EXTRA:-} > "$TMP/fio.err" 2>&1 &
	FIO_PID=$!
	cd - > /dev/null
}

# fio_keep: copy fio's output, its verify dumps and the daemon log to
# $FIO_KEEP/<time>.<pid>/ (when FIO_KEEP is set)
fio_keep() {
	[ -n "${FIO_KEEP:-}" ] || return 0
	fk=$FIO_KEEP/$(date +%H%M%S).$$
	mkdir -p "$fk"
	cp "$TMP"/fio.err "$TMP"/fio.json "$LOG" "$fk"/ 2>/dev/null
	# verify_dump writes *.received, *.expected, *.hdr_fail in the working directory
	for f in "$TMP"/*.received "$TMP"/*.expected "$TMP"/*.hdr_fail; do
		[ -f "$f" ] && mv "$f" "$fk"/
	done
	echo "fio output kept in $fk"
}

fio_wait() {
	wait "$FIO_PID"
	FIO_RC=$?
	FIO_PID=
	[ $FIO_RC = 137 ] && fail "fio hung: killed at its deadline"
	shortio_check
	# a mismatch is reported as "verify failed"/"bad magic"/"crc32c" by fio
	# and as error 84 (EILSEQ) with verify_fatal
	if grep -Eqi 'verify (failed|error)|bad magic|crc32c: ' "$TMP/fio.err" "$TMP/fio.json" 2>/dev/null; then
		fail "fio saw a verify mismatch"
		grep -Ei 'verify|magic|crc32c' "$TMP/fio.err" | head -5
		fio_keep
	fi
	FIO_ERR=$(python3 - "$TMP/fio.json" <<'PY'
import json, sys
try:
    t = open(sys.argv[1]).read()
    d = json.loads(t[t.index("{"):])
except Exception:
    print("unreadable")
    sys.exit(0)
errs = sorted({j["error"] for j in d["jobs"]})
for j in d["jobs"]:
    r, w = j["read"], j["write"]
    print("fio job: error %d, read %d MiB, write %d MiB" % (j["error"], r["io_bytes"] >> 20,
          w["io_bytes"] >> 20), file=sys.stderr)
print(max(errs))
PY
)
	[ "$FIO_ERR" = 84 ] && { fail "fio error 84 (EILSEQ): verify mismatch"; fio_keep; }
	[ "$FIO_ERR" = unreadable ] && { fail "fio output unreadable (exit $FIO_RC)"; cat "$TMP/fio.err"; }
	echo "fio: exit $FIO_RC, error $FIO_ERR"
}

probe_start() {
	: > "$TMP/probe"
	(
		while :; do
			t=$(now_ms)
			timeout -s KILL 30 dd if="$F" of=/dev/null bs=4k count=1 skip=15360 \
				iflag=direct status=none 2>/dev/null
			echo "$t $?" >> "$TMP/probe"
			sleep 0.05
		done
	) &
	PROBE_PID=$!
}

probe_stop() {
	[ -n "$PROBE_PID" ] && kill "$PROBE_PID" 2>/dev/null && wait "$PROBE_PID" 2>/dev/null
	PROBE_PID=
}

probe_gap() {
	awk -v t0="$1" '$1 >= t0 && $2 == 0 { print $1 - t0; found = 1; exit }
		END { if (!found) print "none" }' "$TMP/probe"
}

# probe_failures T0 T1: probes started in [T0, T1) that failed
probe_failures() {
	awk -v t0="$1" -v t1="$2" '$1 >= t0 && $1 < t1 && $2 != 0 { n++ } END { print n + 0 }' \
		"$TMP/probe"
}

dd_cmp() {
	head -c $((4 << 20)) /dev/urandom > "$TMP/data"
	timeout 30 dd if="$TMP/data" of="$F" bs=1M seek=40 oflag=direct conv=notrunc status=none ||
		{ fail "dd write after recovery"; return 1; }
	timeout 30 dd if="$F" of="$TMP/back" bs=1M skip=40 count=4 iflag=direct status=none ||
		{ fail "dd read after recovery"; return 1; }
	cmp -s "$TMP/data" "$TMP/back" || { fail "data read back differs"; return 1; }
	return 0
}

fault_cleanup() {
	probe_stop
	[ -n "$FIO_PID" ] && kill -9 "$FIO_PID" 2>/dev/null
	lib_cleanup
}

# stop_within SECS: SIGTERM and wait at most SECS for the daemon to exit
# (else fail and SIGKILL it); STOP_MS is how long it took, DAEMON_RC its
# exit status
stop_within() {
	sw_t0=$(now_ms)
	kill -TERM "$DPID"
	i=0
	while kill -0 "$DPID" 2>/dev/null && [ $i -lt $(($1 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	STOP_MS=$(($(now_ms) - sw_t0))
	if kill -0 "$DPID" 2>/dev/null; then
		fail "SIGTERM: still running after $1 s"
		kill -9 "$DPID"
	fi
	wait "$DPID"
	DAEMON_RC=$?
	DPID=
}

# fault_stop: SIGTERM within 30 s, exit 0, unmounted
fault_stop() {
	stop_within 30
	[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC after SIGTERM"
	fuse_mounted && fail "still mounted after SIGTERM"
}
