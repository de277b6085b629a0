#!/bin/sh
# run.sh SUITE... - run test suites and print one summary.
#   unit         every check binary in $BUILD/tests (counts check's test cases)
#   unit-san     the same from $BUILD_SAN (ASan+UBSan build)
#   unit-tsan    the same from $BUILD_TSAN (ThreadSanitizer build)
#   unit-valgrind  the unit tests of $BUILD under valgrind memcheck (no fork,
#                no suppressions; any error or definite leak fails the test)
#   fuzz         every libFuzzer target in $BUILD_FUZZ/fuzz for $FUZZ_SECONDS
#                each, on a scratch copy of tests/fuzz/corpus/NAME
#   integration  every tests/integration/*.sh against $BUILD (FUSE over the sim),
#                the daemon on the /dev/fuse transport (FUSE_TRANSPORT=classic)
#   integration-both, integration-once, integration-alone  the same split
#                in three: the scripts integration-uring runs again, the
#                transport-independent ones, and those marked "# alone: WHY"
#                (they want a global resource, such as the hugepages, to
#                themselves; tests/check.sh runs them when nothing else runs)
#   integration-uring  the same on FUSE over io_uring: fuse's enable_uring
#                parameter is set to Y for the run and restored after; skipped
#                when the kernel has no such parameter or we are not root.  A
#                script with a line "# transport-independent: WHY" near its
#                top (what it tests does not go through FUSE requests, or not
#                through the transport's part of them) runs in the
#                integration suite only
#   integration-san  the same against $BUILD_SAN
#   vm           every tests/vm/t-*.sh (VFIO on QEMU's NVMe model in a guest)
# A test script exits 0 (pass), 77 (skip: says why) or anything else (fail).
# Each test's and each suite's wall time is printed ("==== SUITE: N s").
# Ends with "N passed, N failed, N skipped" and exits 1 if anything failed;
# RUN_SUMMARY=FILE: that line (and the failed tests) appended to FILE too.
# TESTS=pattern runs only the tests whose name matches (grep -E); a test script
# running past SCRIPT_TIMEOUT seconds (900, or what a "# timeout: N" line of
# the script says) is ended and fails.
# Under ThreadSanitizer and valgrind the unit tests see NVMEFS_TEST_SLOW=1:
# the tests that run timed fault sequences stretch their timeouts and run
# fewer of them.  Under valgrind they also see NVMEFS_TEST_VALGRIND=1 (what
# counts the threads' context switches, which valgrind's scheduler adds to,
# shows the count instead of judging it).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BUILD:-build}
BUILD_SAN=${BUILD_SAN:-build-san}
BUILD_TSAN=${BUILD_TSAN:-build-tsan}
BUILD_FUZZ=${BUILD_FUZZ:-build-fuzz}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
case "$BUILD_SAN" in /*) ;; *) BUILD_SAN=$ROOT/$BUILD_SAN ;; esac
case "$BUILD_TSAN" in /*) ;; *) BUILD_TSAN=$ROOT/$BUILD_TSAN ;; esac
case "$BUILD_FUZZ" in /*) ;; *) BUILD_FUZZ=$ROOT/$BUILD_FUZZ ;; esac
LOGDIR=$BUILD/test-logs
mkdir -p "$LOGDIR"
PASS=0 FAIL=0 SKIP=0 FAILED=
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# a data race fails the test (exit 66) with both stacks in the log
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

want() { [ -z "${TESTS:-}" ] || echo "$1" | grep -Eq "$TESTS"; }

# why NAME HOW LOG: a failed script's first failure lines, repeated in the
# summary at the end (the end of a long run's output is what gets read)
WHY=$(mktemp /tmp/nvmefs-why.XXXXXX)
trap 'rm -f "$WHY"' EXIT
# a run ended by a signal runs the EXIT trap too (it puts enable_uring back)
trap 'exit 130' INT
trap 'exit 143' TERM
why() {
	echo "$1 ($2):" >> "$WHY"
	grep -E '^FAIL|^timed out after|:[FE]:|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|^SUMMARY: ' "$3" | head -n 3 | cut -c 1-300 | sed 's/^/    /' >> "$WHY"
}

run_unit() { # dir label [wrapper...]
	dir=$1 label=$2
	shift 2
	for t in "$dir"/tests/test_*; do
		[ -x "$t" ] || continue
		n="$label/$(basename "$t")"
		want "$n" || continue
		log=$LOGDIR/$(echo "$n" | tr / _).log
		start=$(date +%s)
		CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60} "$@" "$t" > "$log" 2>&1
		rc=$?
		dt=$(( $(date +%s) - start ))
		# check prints "NN%: Checks: N, Failures: F, Errors: E"
		line=$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -1)
		cat "$log"
		if [ -n "$line" ]; then
			c=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
			f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
			e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
			PASS=$((PASS + c - f - e)); FAIL=$((FAIL + f + e))
		fi
		if [ $rc != 0 ] || [ -z "$line" ]; then
			[ -z "$line" ] && FAIL=$((FAIL + 1))
			FAILED="$FAILED $n"; echo "FAIL: $n (exit $rc, ${dt}s)"
			why "$n" "exit $rc" "$log"
		else
			echo "PASS: $n (${dt}s)"
		fi
	done
}

run_scripts() { # label build files...
	label=$1 build=$2; shift 2
	for s in "$@"; do
		[ -f "$s" ] || continue
		n="$label/$(basename "$s" .sh)"
		want "$n" || continue
		log=$LOGDIR/$(echo "$n" | tr / _).log
		echo "---- $n"
		start=$(date +%s)
		# a test that hangs (on a mount nobody serves, say) fails after
		# SCRIPT_TIMEOUT seconds instead of holding the whole run.  An
		# integration script gets SIGUSR1, which the daemon answers with
		# a stats line, so that the script's trap (lib.sh) can still see
		# what the daemon's threads wait on; KILL 30 s later
		sig=TERM
		case $label in integration*) sig=USR1 ;; esac
		# a script may ask for more with a "# timeout: SECONDS" line
		lim=${SCRIPT_TIMEOUT:-$(sed -n 's/^# timeout: \([0-9][0-9]*\)$/\1/p' "$s" | head -n 1)}
		lim=${lim:-900}
		BUILD=$build ROOT=$ROOT timeout -s $sig -k 30 "$lim" sh "$s" > "$log" 2>&1
		rc=$?
		dt=$(( $(date +%s) - start ))
		[ $rc = 124 ] && echo "timed out after $lim s (SCRIPT_TIMEOUT, or the script's # timeout: line)" >> "$log"
		case $rc in
		0) PASS=$((PASS + 1)); tail -n 3 "$log"; echo "PASS: $n (${dt}s)" ;;
		77) SKIP=$((SKIP + 1)); echo "SKIP: $n: $(tail -n 1 "$log")" ;;
		*) FAIL=$((FAIL + 1)); FAILED="$FAILED $n"; tail -n 40 "$log"; echo "FAIL: $n (exit $rc, ${dt}s)"
		   why "$n" "exit $rc after ${dt} s" "$log" ;;
		esac
	done
}

run_fuzz() { # every target for FUZZ_SECONDS on a scratch corpus (seeds untouched)
	secs=${FUZZ_SECONDS:-60}
	for f in "$BUILD_FUZZ"/fuzz/fuzz_*; do
		[ -x "$f" ] || continue
		name=$(basename "$f"); short=${name#fuzz_}
		n="fuzz/$short"
		want "$n" || continue
		log=$LOGDIR/fuzz_$short.log
		work=$(mktemp -d /tmp/nvmefs-fuzz.XXXXXX)
		seeds=$HERE/fuzz/corpus/$short
		mkdir -p "$work/corpus" "$work/crash"
		dict=
		[ -f "$HERE/fuzz/$short.dict" ] && dict=-dict=$HERE/fuzz/$short.dict
		"$f" $dict -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
			-artifact_prefix="$work/crash/" "$work/corpus" "$seeds" > "$log" 2>&1
		rc=$?
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
		if [ $rc = 0 ]; then
			PASS=$((PASS + 1)); echo "PASS: $n (${execs:-?} executions in ${secs}s)"
		else
			FAIL=$((FAIL + 1)); FAILED="$FAILED $n"; tail -n 60 "$log"
			for a in "$work"/crash/*; do
				[ -f "$a" ] && cp "$a" "$LOGDIR/" && echo "artifact: $LOGDIR/$(basename "$a")"
			done
			echo "FAIL: $n (exit $rc)"
			why "$n" "exit $rc" "$log"
		fi
		rm -rf "$work"
	done
}

# transport_once FILE: the script says it does not depend on the transport
transport_once() { head -n 40 "$1" | grep -q '^# transport-independent: '; }
# alone FILE: the script wants the machine to itself
alone() { head -n 40 "$1" | grep -q '^# alone: '; }

for suite in "$@"; do
	echo "==== $suite"
	suite_t0=$(date +%s)
	case $suite in
	unit) run_unit "$BUILD" unit ;;
	unit-san) run_unit "$BUILD_SAN" unit-san ;;
	unit-tsan) export NVMEFS_TEST_SLOW=1; run_unit "$BUILD_TSAN" unit-tsan; unset NVMEFS_TEST_SLOW ;;
	unit-valgrind)
		command -v valgrind >/dev/null || { echo "SKIP: unit-valgrind: no valgrind"; SKIP=$((SKIP + 1)); continue; }
		# no fork: valgrind then follows each test case in one process.
		# --fair-sched=yes: valgrind runs one thread at a time, and its
		# default lock let a test's polling thread starve the device thread
		# it waits for (test_qpair once took 880 s instead of 35 s)
		CK_FORK=no
		export CK_FORK
		ck_t=${CK_DEFAULT_TIMEOUT:-}
		CK_DEFAULT_TIMEOUT=600
		export NVMEFS_TEST_SLOW=1 NVMEFS_TEST_VALGRIND=1
		run_unit "$BUILD" unit-valgrind \
			valgrind -q --fair-sched=yes --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite
		unset NVMEFS_TEST_SLOW NVMEFS_TEST_VALGRIND
		unset CK_FORK
		if [ -n "$ck_t" ]; then CK_DEFAULT_TIMEOUT=$ck_t; else unset CK_DEFAULT_TIMEOUT; fi ;;
	fuzz) run_fuzz ;;
	integration | integration-both | integration-once | integration-alone)
		export FUSE_TRANSPORT=classic
		these=
		for s in "$HERE"/integration/t-*.sh; do
			case $suite in
			integration-both) { transport_once "$s" || alone "$s"; } && continue ;;
			integration-once) { transport_once "$s" && ! alone "$s"; } || continue ;;
			integration-alone) alone "$s" || continue ;;
			esac
			these="$these $s"
		done
		# shellcheck disable=SC2086
		run_scripts integration "$BUILD" $these
		unset FUSE_TRANSPORT ;;
	integration-uring)
		sw=/sys/module/fuse/parameters/enable_uring
		if [ ! -e $sw ]; then
			echo "SKIP: integration-uring: this kernel has no FUSE over io_uring ($sw)"
			SKIP=$((SKIP + 1)); continue
		fi
		old=$(cat $sw)
		if ! echo Y 2>/dev/null > $sw; then
			echo "SKIP: integration-uring: cannot set $sw (needs root)"
			SKIP=$((SKIP + 1)); continue
		fi
		trap 'echo "$old" > $sw; rm -f "$WHY"' EXIT
		export FUSE_TRANSPORT=uring
		both= once=
		for s in "$HERE"/integration/t-*.sh; do
			if transport_once "$s"; then once="$once $(basename "$s" .sh)"; else both="$both $s"; fi
		done
		[ -z "$once" ] || echo "run by the integration suite only (transport-independent):$once"
		# shellcheck disable=SC2086
		run_scripts integration-uring "$BUILD" $both
		unset FUSE_TRANSPORT
		echo "$old" > $sw
		trap 'rm -f "$WHY"' EXIT ;;
	integration-san) run_scripts integration-san "$BUILD_SAN" "$HERE"/integration/t-*.sh ;;
	vm) run_scripts vm "$BUILD" "$HERE"/vm/t-*.sh ;;
	*) echo "run.sh: unknown suite $suite" >&2; exit 2 ;;
	esac
	echo "==== $suite: $(( $(date +%s) - suite_t0 )) s"
done
echo "===="
if [ -n "$FAILED" ]; then
	head -n 40 "$WHY"
	echo "failed:$FAILED"
fi
echo "$PASS passed, $FAIL failed, $SKIP skipped"
if [ -n "${RUN_SUMMARY:-}" ]; then
	{ [ -z "$FAILED" ] || echo "failed:$FAILED"; echo "$PASS passed, $FAIL failed, $SKIP skipped"; } >> "$RUN_SUMMARY"
fi
[ "$FAIL" = 0 ]
