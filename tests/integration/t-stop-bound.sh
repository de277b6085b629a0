#!/bin/sh
# t-stop-bound.sh - a stop ends within its bound whatever io_timeout_ms says,
# and answers every request.  io_timeout_ms is the largest allowed (600 s):
# a hung controller's commands would wait ten minutes before the engine even
# aborts them.  With fio writing and reading with verify and the controller
# hung, SIGTERM must: drain for at most 30 s, then end the commands on the
# controller (abrupt shutdown, disable), so that fio gets EIO instead of
# waiting; exit 3 (requests were cancelled) well inside the unit's
# TimeoutStopSec; unmount.  fio must end by itself, with no verify mismatch.
# Then the same with a controller that is not hung, only slow: the stop
# waits for its commands and exits 0.
# STOP_BOUND_PHASES (default "1 2") runs only the phases named;
# STOP_BOUND_DELAY_MS (1500) is the second phase's delay per command and
# STOP_BOUND_SLEEPS ("2 1") its seconds of fio before the delay and of the
# delay before the stop: for scripts/soak-stop-bound (with FIO_EXTRA and
# FIO_KEEP, see fault-lib.sh).
. "$(dirname "$0")/fault-lib.sh"
IO_TIMEOUT=600000
PHASES=${STOP_BOUND_PHASES:-1 2}
DELAY_MS=${STOP_BOUND_DELAY_MS:-1500}
set -- ${STOP_BOUND_SLEEPS:-2 1}
PRE_S=$1 HOLD_S=$2
fault_start
dd_cmp || fail "baseline dd + cmp"

case " $PHASES " in
*" 1 "*) ;;
*)
	# the first phase's end: the daemon stopped, the mount gone
	fault_stop
	;;
esac
phase1() {
	fio_start 60
	fio_running
	ctl inject nvme0 hang > /dev/null || fail "inject hang"
	sleep 1
	# the bound lifecycle.h states (drain 30 + cancel 25 + reactors 5 + shutdown 45 s); the
	# unit's TimeoutStopSec is 120
	stop_within 110
	dt=$STOP_MS rc=$DAEMON_RC
	echo "measure: stop with a hung controller and io_timeout_ms 600000: ${dt} ms, exit $rc"
	[ "$rc" = 3 ] || fail "exit $rc after cancelling requests, want 3"
	grep -q "stopped, after ending with EIO the requests the drain could not wait for: exit status 3" "$LOG" ||
		fail "the exit status's reason was not logged"
	[ "$dt" -lt 105000 ] || fail "the stop took ${dt} ms, more than its 105 s bound"
	grep -q "ending the commands outstanding" "$LOG" || fail "no cancel logged"
	grep -q "stop: ending [0-9]* command(s) still outstanding" "$LOG" || fail "the engine did not say what it ended"
	fio_wait
	# EIO for the requests the daemon had taken (their commands cancelled);
	# ENOTCONN or ECONNABORTED for those the kernel still held at the unmount
	# (over io_uring a request that reaches an entry after the stop waits there);
	# ENOENT when fio reopened the file by its path after the unmount (it does
	# between passes, and must not create one there: fault-lib.sh)
	case $FIO_ERR in
	2 | 5 | 103 | 107) ;;
	*) fail "fio error $FIO_ERR, want EIO (5), or ECONNABORTED/ENOTCONN/ENOENT at the unmount" ;;
	esac
	fuse_mounted && fail "still mounted after the stop"
}
case " $PHASES " in *" 1 "*) phase1 ;; esac

phase2() {
	# slow, not hung: every command completes within 2 s; the stop drains
	daemon_start nvme0n1 || { fail "restart"; finish; }
	fio_start 30
	sleep "$PRE_S"
	ctl inject nvme0 delay "$DELAY_MS" > /dev/null || fail "inject delay"
	sleep "$HOLD_S"
	stop_within 60
	dt=$STOP_MS rc=$DAEMON_RC
	echo "measure: stop with a slow controller ($DELAY_MS ms per command): ${dt} ms, exit $rc"
	[ "$rc" = 0 ] || fail "exit $rc with a slow controller, want 0 (every request answered by the device)"
	grep "audit: [0-9]* violation(s)" "$LOG" | tail -n 1 | sed 's/.*audit: /measure: audit: /'
	fio_wait
	fuse_mounted && fail "still mounted after the second stop"
}
case " $PHASES " in *" 2 "*) phase2 ;; esac
finish
