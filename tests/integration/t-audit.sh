#!/bin/sh
# t-audit.sh - the audit build (src/fuse/audit.h) names what goes wrong, and
# fio's side names a short completion (tests/preload/shortio.c).  With the
# audit build's own faults (NVMEFS_AUDIT_INJECT):
#   twice    a read answered a second time: "answered twice" with the
#            request's events; the kernel refuses the second answer and it is
#            counted in dup_answers (over io_uring the entry refuses it);
#   short    a read answered with 0 bytes: the audit says so, and so does fio
#            through the logger (fio itself takes it for a whole read);
#   corrupt  a byte of a read answer flipped: "not what was last written";
#   scribble a write's buffer changed after its submission: "write buffer
#            changed";
# each counted in audit_violations; with NVMEFS_AUDIT_ABORT=1 the daemon
# aborts on the first.  A clean run of dd and fio shows none.
. "$(dirname "$0")/lib.sh"
lib_init
[ "$AUDIT" = 1 ] || skip "no audit build ($BUILD/nvmefsd-audit)"
command -v fio > /dev/null || skip "no fio"
C=$BUILD/nvmefsctl
conf_sim nvme0 64M block_size=4096 backing=ram
F=$MNT/nvme0n1
head -c $((1 << 20)) /dev/urandom > "$TMP/data"

# expect N PATTERN: N more violation lines matching PATTERN in the log,
# each followed by the request's events; then they are not failures
expect() {
	n=$(grep -c "audit: VIOLATION.*$2" "$LOG")
	[ "$n" -ge "$1" ] || fail "want $1 violation(s) matching '$2', got $n"
	grep -A 3 "audit: VIOLATION.*$2" "$LOG" | head -n 4
	grep -A 1 "audit: VIOLATION.*$2" "$LOG" | grep -q "audit:  .* ms ago: " ||
		fail "no events logged with the violation '$2'"
	AUDIT_SEEN=$(grep -c "audit: VIOLATION" "$LOG")
}

# run KIND:N: a daemon with that fault; 4 MiB written and read back
run() {
	: > "$LOG"
	NVMEFS_AUDIT_INJECT=$1 daemon_start nvme0n1 || { fail "$1: start"; return 1; }
	AUDIT_SEEN=0
	dd if="$TMP/data" of="$F" bs=4k count=16 oflag=direct conv=notrunc status=none
	dd if="$F" of="$TMP/back" bs=4k count=16 iflag=direct status=none
}

stats() {
	"$C" -s "$TMP/admin.sock" stats --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["fuse"][sys.argv[1]])' "$1"
}

# clean: nothing found
: > "$LOG"
daemon_start nvme0n1 || { fail "start"; finish; }
dd if="$TMP/data" of="$F" bs=64k oflag=direct conv=notrunc status=none || fail "write"
dd if="$F" of="$TMP/back" bs=64k count=16 iflag=direct status=none || fail "read"
cmp -s "$TMP/data" "$TMP/back" || fail "read back differs"
fio_verify "$F" 3 16 2 8 || true
[ "$(stats audit_violations)" = 0 ] || fail "violations in a clean run"
daemon_stop
grep -q "audit: 0 violation(s); [1-9][0-9]* read answers" "$LOG" || fail "no summary of a clean run"
grep "audit: 0 violation" "$LOG"

run twice:3
expect 1 "request answered without being in flight: answered twice"
[ "$(stats audit_violations)" -ge 1 ] || fail "twice: audit_violations not counted"
if [ "${FUSE_TRANSPORT:-auto}" = uring ]; then
	grep -q "answered again on an io_uring entry" "$LOG" || fail "twice: the ring took the second answer"
else
	[ "$(stats dup_answers)" = 1 ] || fail "twice: dup_answers $(stats dup_answers), want 1"
	grep -q "the kernel has no request [0-9]* for this answer" "$LOG" || fail "twice: not logged"
fi
daemon_stop

run short:3
expect 1 "answered with 0 bytes, 4096 expected"
: > "$TMP/shortio.log"
SHORTIO_SEEN=0
daemon_stop
NVMEFS_AUDIT_INJECT=short:5 daemon_start nvme0n1 || fail "short: start"
env $(fio_env) fio --name=short --filename="$F" --ioengine=libaio --direct=1 --rw=randread \
	--bs=4k --size=1M --iodepth=4 --output="$TMP/short.out" > /dev/null 2>&1
grep -q "read of 4096 bytes at [0-9]* on fd [0-9]* completed with 0 bytes" "$TMP/shortio.log" ||
	fail "fio's logger did not see the 0-byte read"
grep -q "err= 0" "$TMP/short.out" && echo "fio itself: err 0 (it takes a 0-byte read for a whole one)"
# the drills' check fails on it, with the line
before=$FAILS
shortio_check > "$TMP/sc.out"
[ $FAILS = $((before + 1)) ] || fail "shortio_check did not fail the test"
grep -q "completed with 0 bytes" "$TMP/sc.out" || fail "shortio_check does not show the line"
FAILS=$before
sed "s/^/expected: /" "$TMP/sc.out"
expect 1 "answered with 0 bytes"
daemon_stop

run corrupt:3
expect 1 "read answer: 1 of 1 block(s) of nvme0n1 from block 2 are not what was last written there"
daemon_stop

run scribble:2
expect 1 "write buffer changed between the submission and the completion"
daemon_stop

: > "$LOG"
NVMEFS_AUDIT_ABORT=1 NVMEFS_AUDIT_INJECT=corrupt:1 daemon_start nvme0n1 || fail "abort: start"
dd if="$F" of=/dev/null bs=4k count=1 iflag=direct status=none 2> /dev/null
dd if="$F" of=/dev/null bs=4k count=1 iflag=direct status=none 2> /dev/null
i=0
while daemon_alive && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
daemon_alive && fail "NVMEFS_AUDIT_ABORT=1: the daemon goes on after a violation"
wait "$DPID"
rc=$?
DPID=
echo "NVMEFS_AUDIT_ABORT=1: exit $rc"
[ $rc = 134 ] || fail "NVMEFS_AUDIT_ABORT=1: exit $rc, want 134 (SIGABRT)"
grep -q "aborting on the first violation" "$LOG" || fail "the abort is not said"
AUDIT_SEEN=$(grep -c "audit: VIOLATION" "$LOG")
umount -l "$MNT" 2> /dev/null
finish
