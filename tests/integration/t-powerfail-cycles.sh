#!/bin/sh
# t-powerfail-cycles.sh - power cuts at random moments while real clients
# write with every durability mode, N times, the daemon staying up.
#
# The software controller models a volatile write cache (write_cache =
# volatile, the default): a cut loses every write the daemon had not made
# durable (seed 0) or a seeded random subset of them at block granularity,
# as a real power cut does.  Each cycle runs two crash-writers on disjoint
# block ranges, each write in a mode picked at random (pwrite + fdatasync,
# pwrite + fsync, O_DSYNC and O_SYNC descriptors, RWF_DSYNC, an unaligned
# O_DSYNC write, ZERO_RANGE and PUNCH_HOLE + fsync), plus a third writer that
# writes without ever syncing (filling the cache with data that may go).
# In odd cycles the writers use only the modes that make a write durable by
# itself (O_DSYNC, O_SYNC, RWF_DSYNC, unaligned O_DSYNC: FUA), the first one
# with an occasional fdatasync, so that no Flush of another writer covers
# for a FUA that was not sent.  The second half of the cycles runs a daemon
# that makes O_DSYNC writes durable with a Flush after them instead
# (NVMEFS_DSYNC_FUA_MAX=1), the path of writes above its FUA limit.
# After a random delay the power is cut (inject powerfail), the engine finds
# the controller gone, the writers fail, attach powers it on, and every write
# that was acknowledged as durable must be there, byte for byte, and no block
# may hold anything but its last acknowledged content or the one write in
# flight at the cut.  The cut must have dropped something in at least one
# cycle (else nothing was tested).  POWERFAIL_CYCLES (4) and POWERFAIL_SEED
# (1) make a run repeatable; `make soak` runs many.  CRASH_WRITER_BS (4096)
# is the writers' unit, POWERFAIL_BLOCKS (64) how many each writes over,
# POWERFAIL_NOISE_BS (4k) the unsynced writer's block size; with
# POWERFAIL_WANT_OFFLOAD set, some command must have gone through the
# controller's copy thread (t-powerfail-large.sh: large writes).
. "$(dirname "$0")/fault-lib.sh"
CYCLES=${POWERFAIL_CYCLES:-4}
SEED=${POWERFAIL_SEED:-1}
BLOCKS=${POWERFAIL_BLOCKS:-64}
W=$BUILD/tools/crash-writer
[ -x "$W" ] || { echo "FAIL: no $W (make)"; exit 1; }
fault_start
# per cycle: the delay before the cut (ms, 200..1500) and the cut's seed
# (every other cycle 0: everything not durable goes)
PLAN=$(awk -v s="$SEED" -v n="$CYCLES" 'BEGIN { srand(s); for (i = 1; i <= n; i++)
	printf "%d:%d ", 200 + int(rand() * 1300), (i % 2) ? 0 : 1 + int(rand() * 1000000) }')
c=0
total=0
dropped=0
for p in $PLAN; do
	c=$((c + 1))
	ms=${p%:*} pf=${p#*:}
	J=$TMP/j.$c
	: > "$J"
	: > "$J.b"
	# odd cycles: only the modes that make a write durable by itself (FUA),
	# so that no fsync of another writer covers for a FUA that was not sent
	modes=all
	[ $((c % 2)) = 1 ] && modes=odsync,osync,rwfdsync,unaligned,fdatasync
	"$W" write "$F" "$J" $((SEED * 1000 + c)) 0 "$BLOCKS" "$modes" 2> "$TMP/w1.err" &
	P1=$!
	[ "$modes" = all ] || modes=odsync,osync,rwfdsync,unaligned
	"$W" write "$F" "$J.b" $((SEED * 1000 + c + 500)) "$BLOCKS" "$BLOCKS" "$modes" 2> "$TMP/w2.err" &
	P2=$!
	# never synced, at 8..40 MiB (not checked: it only keeps the cache full
	# of data that may go)
	timeout -s KILL 60 env $(fio_env) fio --name=noise --filename="$F" --ioengine=libaio --direct=1 --allow_file_create=0 \
		--rw=randwrite --bs="${POWERFAIL_NOISE_BS:-4k}" --iodepth=8 --offset=8M --size=32M --runtime=30 \
		--time_based > /dev/null 2>&1 &
	P3=$!
	sleep "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
	before=$(grep -c "power cut" "$LOG")
	ctl inject nvme0 powerfail "$pf" > /dev/null || fail "cycle $c: inject powerfail"
	wait_state removed 30
	# the writers fail (EIO) on the cut device; stop them either way
	kill -9 "$P1" "$P2" "$P3" 2> /dev/null
	wait "$P1" 2> /dev/null
	wait "$P2" 2> /dev/null
	wait "$P3" 2> /dev/null
	ctl attach --wait nvme0 > /dev/null || { fail "cycle $c: attach after the cut"; break; }
	acks=$(cat "$J" "$J.b" | grep -c '^A')
	total=$((total + acks))
	line=$(grep "power cut" "$LOG" | tail -n 1)
	[ "$(grep -c "power cut" "$LOG")" -gt "$before" ] || fail "cycle $c: the cut is not logged"
	lost=$(echo "$line" | sed -n 's/.*: \([0-9]*\) cached blocks lost.*/\1/p')
	[ "${lost:-0}" -gt 0 ] && dropped=$((dropped + 1))
	echo "cycle $c: $modes, cut after ${ms} ms (seed $pf), $acks writes acknowledged; ${line#*: }"
	[ "$acks" -gt 0 ] || fail "cycle $c: no write was acknowledged before the cut"
	"$W" verify "$F" "$J" $((SEED * 1000 + c)) || fail "cycle $c: acknowledged writes lost"
	"$W" verify "$F" "$J.b" $((SEED * 1000 + c + 500)) ||
		fail "cycle $c: acknowledged writes lost (second writer)"
	if [ "$c" = $(((CYCLES + 1) / 2)) ] && [ "$c" != "$CYCLES" ]; then
		# the second half: O_DSYNC writes made durable by a Flush after
		# them instead of FUA (the path for writes above dsync_fua_max)
		fault_stop
		export NVMEFS_DSYNC_FUA_MAX=1
		daemon_start nvme0n1 || { fail "restart with NVMEFS_DSYNC_FUA_MAX=1"; break; }
		unset NVMEFS_DSYNC_FUA_MAX
		echo "from cycle $((c + 1)): O_DSYNC writes followed by a Flush"
	fi
done
[ "$c" = "$CYCLES" ] || fail "ran $c of $CYCLES cycles"
[ "$dropped" -gt 0 ] || fail "no cut dropped anything: the test tested nothing"
echo "$c cycles, $total acknowledged writes checked, $dropped cuts dropped cached blocks"
if [ -n "${POWERFAIL_WANT_OFFLOAD:-}" ]; then
	off=$(sim_offloaded)
	echo "measure: offloaded=$off (the last daemon)"
	[ "$off" != none ] && [ "$off" -gt 0 ] || fail "no command went through the copy thread"
fi
fault_stop
finish
