#!/bin/sh
# t-crash-cycles.sh - kill -9 at random moments during fsync'd writes, N times.
#
# Each cycle starts nvmefsd over a file-backed namespace (the backing file
# survives the daemon, as a disk survives a crashed driver), runs
# crash-writer (each write journaled as intended, written O_DIRECT,
# fdatasync'd, then journaled as acknowledged), kills the daemon with
# SIGKILL after a random delay, restarts it over the dead mount and checks
# that every write acknowledged in that cycle is there.
# CRASH_CYCLES (3) and CRASH_SEED (1) make a run repeatable: the same seed
# gives the same kill delays and the same write sequences.
. "$(dirname "$0")/lib.sh"
lib_init
CYCLES=${CRASH_CYCLES:-3}
SEED=${CRASH_SEED:-1}
W=$BUILD/tools/crash-writer
[ -x "$W" ] || { echo "FAIL: no $W (make)"; exit 1; }
conf_write <<EOF
[controller nvme0]
device = sim
size = 16M
block_size = 4096
backing = $TMP/%c-%n.img
exec = thread
EOF
# kill delays in ms, 150..1500, from the seed
DELAYS=$(awk -v s="$SEED" -v n="$CYCLES" \
	'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%d ", 150 + int(rand() * 1350) }')
c=0
total=0
for ms in $DELAYS; do
	c=$((c + 1))
	J=$TMP/journal.$c
	: > "$J"
	daemon_start nvme0n1 || { fail "cycle $c: start"; break; }
	if [ $c -gt 1 ] && ! grep -q "stale FUSE mount" "$LOG"; then
		fail "cycle $c: the dead mount was not cleared"
	fi
	"$W" write "$MNT/nvme0n1" "$J" $((SEED * 1000 + c)) 4096 2> "$TMP/writer.err" &
	WP=$!
	sleep "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
	kill -9 "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=
	# the writer now fails (ENOTCONN) or waits on the dead connection: stop it
	kill -9 "$WP" 2>/dev/null
	wait "$WP" 2>/dev/null
	acks=$(grep -c '^A' "$J")
	total=$((total + acks))
	echo "cycle $c: killed after ${ms} ms with $acks writes acknowledged"
	[ "$acks" -gt 0 ] || fail "cycle $c: no write was acknowledged before the kill"
	daemon_start nvme0n1 || { fail "cycle $c: restart over the dead mount"; break; }
	"$W" verify "$MNT/nvme0n1" "$J" $((SEED * 1000 + c)) ||
		fail "cycle $c: acknowledged writes lost"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "cycle $c: daemon exit $DAEMON_RC after the check"
done
[ "$c" = "$CYCLES" ] || fail "ran $c of $CYCLES cycles"
echo "$c cycles, $total acknowledged writes checked"
finish
