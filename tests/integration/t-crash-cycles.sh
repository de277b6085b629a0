#!/bin/sh
# t-crash-cycles.sh - kill -9 at random moments during durable writes, N times,
# in every durability mode an application uses.
#
# Each cycle starts nvmefsd over a file-backed namespace (the backing file
# survives the daemon, as a disk survives a crashed driver), runs two
# crash-writers on disjoint halves of it, each write in a mode picked at
# random: pwrite + fdatasync, pwrite + fsync, an O_DSYNC or O_SYNC
# descriptor, RWF_DSYNC, an unaligned O_DSYNC write (read-modify-write),
# ZERO_RANGE or PUNCH_HOLE + fsync -- journaled as intended before, as
# acknowledged after --, kills the daemon with SIGKILL after a random delay,
# restarts it over the dead mount and checks that every write acknowledged
# in that cycle is there and no block holds anything but its last
# acknowledged content or the one write in flight.
# CRASH_CYCLES (3) and CRASH_SEED (1) make a run repeatable: the same seed
# gives the same kill delays and the same write sequences.
. "$(dirname "$0")/lib.sh"
lib_init
CYCLES=${CRASH_CYCLES:-3}
SEED=${CRASH_SEED:-1}
W=$BUILD/tools/crash-writer
[ -x "$W" ] || { echo "FAIL: no $W (make)"; exit 1; }
conf_sim nvme0 16M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread
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
	"$W" write "$MNT/nvme0n1" "$J" $((SEED * 1000 + c)) 0 64 all 2> "$TMP/writer.err" &
	WP=$!
	"$W" write "$MNT/nvme0n1" "$J.b" $((SEED * 1000 + c + 500)) 64 64 all 2> "$TMP/writer.b.err" &
	WPB=$!
	sleep "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
	kill -9 "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=
	# the writer now fails (ENOTCONN) or waits on the dead connection: stop it
	kill -9 "$WP" "$WPB" 2>/dev/null
	wait "$WP" 2>/dev/null
	wait "$WPB" 2>/dev/null
	acks=$(cat "$J" "$J.b" | grep -c '^A')
	total=$((total + acks))
	echo "cycle $c: killed after ${ms} ms with $acks writes acknowledged"
	[ "$acks" -gt 0 ] || fail "cycle $c: no write was acknowledged before the kill"
	daemon_start nvme0n1 || { fail "cycle $c: restart over the dead mount"; break; }
	"$W" verify "$MNT/nvme0n1" "$J" $((SEED * 1000 + c)) ||
		fail "cycle $c: acknowledged writes lost"
	"$W" verify "$MNT/nvme0n1" "$J.b" $((SEED * 1000 + c + 500)) ||
		fail "cycle $c: acknowledged writes lost (second writer)"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "cycle $c: daemon exit $DAEMON_RC after the check"
done
[ "$c" = "$CYCLES" ] || fail "ran $c of $CYCLES cycles"
echo "$c cycles, $total acknowledged writes checked"
finish
