#!/bin/sh
# t-fuse-teardown.sh - no answer goes where it must not: a request answered
# twice is refused by the kernel and counted (dup_answers) and logged; a
# request the stop gave up on, answered after the unmount, is written to no
# file that has since taken a freed descriptor number (late_answers)
# (tests/helpers/fuse-teardown.c, the daemon's stack in one process).
. "$(dirname "$0")/lib.sh"
lib_init
H=$BUILD/tools/fuse-teardown
[ -x "$H" ] || { echo "FAIL: no $H (make)"; exit 1; }
timeout 60 "$H" "$MNT" > "$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
[ $rc = 0 ] || fail "fuse-teardown exited $rc"
grep -q "the kernel has no request [0-9]* for this answer (ENOENT on a live connection): answered twice" "$TMP/out" ||
	fail "the second answer was not logged"
[ "$(grep -c "for this answer" "$TMP/out")" = 1 ] || fail "not exactly one line for the second answer"
fuse_mounted && fail "left mounted"
finish
