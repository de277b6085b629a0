#!/bin/sh
# run.sh SUITE... - run test suites and print one summary.
#   unit         every check binary in $BUILD/tests (counts check's test cases)
#   unit-san     the same from $BUILD_SAN (ASan+UBSan build)
#   integration  every tests/integration/*.sh against $BUILD (FUSE over the sim)
#   integration-san  the same against $BUILD_SAN
#   vm           every tests/vm/t-*.sh (VFIO on QEMU's NVMe model in a guest)
# A test script exits 0 (pass), 77 (skip: says why) or anything else (fail).
# Ends with "N passed, N failed, N skipped" and exits 1 if anything failed.
# TESTS=pattern runs only the tests whose name matches (grep -E).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BUILD:-build}
BUILD_SAN=${BUILD_SAN:-build-san}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
case "$BUILD_SAN" in /*) ;; *) BUILD_SAN=$ROOT/$BUILD_SAN ;; esac
LOGDIR=$BUILD/test-logs
mkdir -p "$LOGDIR"
PASS=0 FAIL=0 SKIP=0 FAILED=
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

want() { [ -z "${TESTS:-}" ] || echo "$1" | grep -Eq "$TESTS"; }

run_unit() { # dir label
	for t in "$1"/tests/test_*; do
		[ -x "$t" ] || continue
		n="$2/$(basename "$t")"
		want "$n" || continue
		log=$LOGDIR/$(echo "$n" | tr / _).log
		CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60} "$t" > "$log" 2>&1
		rc=$?
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
			FAILED="$FAILED $n"; echo "FAIL: $n (exit $rc)"
		else
			echo "PASS: $n"
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
		BUILD=$build ROOT=$ROOT sh "$s" > "$log" 2>&1
		rc=$?
		dt=$(( $(date +%s) - start ))
		case $rc in
		0) PASS=$((PASS + 1)); tail -n 3 "$log"; echo "PASS: $n (${dt}s)" ;;
		77) SKIP=$((SKIP + 1)); echo "SKIP: $n: $(tail -n 1 "$log")" ;;
		*) FAIL=$((FAIL + 1)); FAILED="$FAILED $n"; tail -n 40 "$log"; echo "FAIL: $n (exit $rc, ${dt}s)" ;;
		esac
	done
}

for suite in "$@"; do
	echo "==== $suite"
	case $suite in
	unit) run_unit "$BUILD" unit ;;
	unit-san) run_unit "$BUILD_SAN" unit-san ;;
	integration) run_scripts integration "$BUILD" "$HERE"/integration/t-*.sh ;;
	integration-san) run_scripts integration-san "$BUILD_SAN" "$HERE"/integration/t-*.sh ;;
	vm) run_scripts vm "$BUILD" "$HERE"/vm/t-*.sh ;;
	*) echo "run.sh: unknown suite $suite" >&2; exit 2 ;;
	esac
done
echo "===="
[ -n "$FAILED" ] && echo "failed:$FAILED"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]
