#!/bin/sh
# check.sh - what `make check` runs: every build and every suite of
# tests/run.sh, in three lanes at once after `make all`:
#   lane 1: integration-both (/dev/fuse), integration-uring; then, once the
#           other lanes have ended, integration-alone and vm
#   lane 2: the ASan+UBSan build of the unit tests, unit-san; unit-valgrind
#   lane 3: the ThreadSanitizer build, unit-tsan; the libFuzzer build, fuzz
#           (FUZZ_SECONDS each); unit; integration-once (the
#           transport-independent integration tests, on /dev/fuse)
# The suites wait much of their time (for timeouts, for fio's rate, for a
# device's delay: test_recovery uses a fifth of a CPU), so three lanes keep
# two CPUs busy.  The integration suites stay in one lane, one after the
# other: they share the kernel's FUSE switches, fusectl and CPU 1
# (t-uring-cpus takes it offline for a moment); the transport-independent
# tests touch none of these.  No test measures an
# absolute time or rate, and a test that meets a global resource another
# lane holds says it could not judge instead of failing, so the other lanes
# slow lane 1 without failing it; a test that needs such a resource to
# itself (the hugepages: t-hugepages) is marked "# alone:" and runs in
# integration-alone, after the other lanes.  So does the vm suite: QEMU's
# emulator wants every CPU.
# Lanes 2 and 3 write to build/test-logs/lane2.out and lane3.out, printed
# when lane 1 is done.  Every stage prints its wall time and the CPU time of
# its processes ("---- stage NAME: N s, CPU N s"); a table of them all ends
# the output, then "N passed, N failed, N skipped" over every lane; exits 1
# if anything failed.  CHECK_LANES=1: one lane, the stages one after the
# other in the order above.  TESTS and the other variables of tests/run.sh
# pass through.
set -u
cd "$(dirname "$0")/.." || exit 2
J=-j$(nproc)
LOGDIR=$PWD/build/test-logs
mkdir -p "$LOGDIR"
STAGES=$LOGDIR/stages
export RUN_SUMMARY=$LOGDIR/summary
: > "$STAGES"
: > "$RUN_SUMMARY"
T0=$(date +%s)
export FUZZ_SECONDS=${FUZZ_SECONDS:-15}

# cpu_of FILE: the children's CPU seconds (user + system) in what the
# shell's times printed into FILE
cpu_of() {
	sed -n 2p "$1" | awk '{ gsub(/s/, ""); split($1, u, "m"); split($2, s, "m")
		printf "%d\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }'
}

# stage NAME CMD...: run CMD, print and record its wall time, the CPU time
# it took (all its processes; CPU / wall: how many CPUs it kept busy) and
# its exit status
stage() {
	sg_name=$1
	shift
	sg_t0=$(date +%s)
	echo "---- stage $sg_name: starts at +$((sg_t0 - T0)) s"
	times > "$LOGDIR/times.$sg_name.0"
	"$@"
	sg_rc=$?
	times > "$LOGDIR/times.$sg_name.1"
	sg_dt=$(($(date +%s) - sg_t0))
	sg_cpu=$(($(cpu_of "$LOGDIR/times.$sg_name.1") - $(cpu_of "$LOGDIR/times.$sg_name.0")))
	echo "---- stage $sg_name: ${sg_dt} s, CPU ${sg_cpu} s (exit $sg_rc)"
	echo "$sg_name $sg_dt $sg_rc $((sg_t0 - T0)) $sg_cpu" >> "$STAGES"
	return $sg_rc
}

# quiet LOG CMD...: CMD with its output in LOG
quiet() {
	q_log=$1
	shift
	"$@" > "$q_log" 2>&1
}

# build NAME MAKE-ARGS...: a build stage, its output in LOGDIR; a failed
# build counts as a failed test
build() {
	b_name=$1
	shift
	stage "$b_name" quiet "$LOGDIR/$b_name.out" make $J "$@" && return 0
	tail -n 30 "$LOGDIR/$b_name.out"
	{ echo "failed: $b_name"; echo "0 passed, 1 failed, 0 skipped"; } >> "$RUN_SUMMARY"
	return 1
}

lane2() {
	build build-san SAN=1 unit-tests && stage unit-san env BUILD_SAN=build-san sh tests/run.sh unit-san
	stage unit-valgrind env BUILD=build sh tests/run.sh unit-valgrind
}

lane3() {
	build build-tsan TSAN=1 unit-tests && stage unit-tsan env BUILD_TSAN=build-tsan sh tests/run.sh unit-tsan
	build build-fuzz FUZZ=1 fuzzers && stage fuzz env BUILD_FUZZ=build-fuzz sh tests/run.sh fuzz
	stage unit env BUILD=build sh tests/run.sh unit
	stage integration-once env BUILD=build sh tests/run.sh integration-once
}

LANES=${CHECK_LANES:-3}
echo "check: $(nproc) CPUs, $LANES lane(s)"
build build all || { echo "make all failed"; exit 1; }
BG=
if [ "$LANES" = 1 ]; then
	lane2
	lane3
else
	lane2 > "$LOGDIR/lane2.out" 2>&1 &
	BG="$BG $!"
	lane3 > "$LOGDIR/lane3.out" 2>&1 &
	BG="$BG $!"
fi
# in a subshell: the CPU time the shell counts for its children would take
# in lanes 2 and 3 as they end
(
	stage integration-both env BUILD=build sh tests/run.sh integration-both
	stage integration-uring env BUILD=build sh tests/run.sh integration-uring
)
if [ -n "$BG" ]; then
	echo "---- lane 1 waits for lanes 2 and 3 to end at +$(($(date +%s) - T0)) s"
	# shellcheck disable=SC2086
	wait $BG
	BG=
fi
stage integration-alone env BUILD=build sh tests/run.sh integration-alone
stage vm env BUILD=build sh tests/run.sh vm
if [ "$LANES" != 1 ]; then
	for l in 2 3; do
		echo "==== lane $l (from after make all, beside lane 1)"
		cat "$LOGDIR/lane$l.out"
	done
fi
echo "==== stages: start (s from the beginning), wall time, CPU time of its processes, exit status"
sort -n -k4 "$STAGES" | awk '{ printf "%-18s +%-6d %6d s  CPU %6d s  exit %d\n", $1, $4, $2, $5, $3 }'
rm -f "$LOGDIR"/times.*
echo "==== total: $(($(date +%s) - T0)) s"
grep '^failed:' "$RUN_SUMMARY"
sum=$(awk '/^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { p += $1; f += $3; s += $5 }
	END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$RUN_SUMMARY")
echo "$sum"
case $sum in *" 0 failed,"*) exit 0 ;; *) exit 1 ;; esac
