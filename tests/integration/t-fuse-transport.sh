#!/bin/sh
# t-fuse-transport.sh - which FUSE transport serves, and what it costs.
# On the suite's transport (FUSE_TRANSPORT): nvmefsctl status, stats and
# queues name it; over io_uring requests are counted as ring requests, there
# is one FUSE queue per possible CPU; on both, block-aligned reads and writes
# are served with no payload byte copied in user space (an unaligned read is,
# and is counted, over io_uring; over /dev/fuse a read is answered from the
# DMA buffer with no copy, and a write's data is read into a landing buffer).
# Over /dev/fuse with one landing buffer (fuse_queue_depth = 1) and every
# command held 300 ms, four 1 MiB writes at once: the first holds the buffer,
# the data of the ones read meanwhile is copied (and counted), all land
# right.  Then, as root where the kernel has the switch: with
# enable_uring off, fuse_transport = uring refuses to start with a message
# naming the switch, and auto serves over /dev/fuse saying why; with the
# switch on but io_uring refused (kernel.io_uring_disabled = 2), auto falls
# back the same way and uring does not start, leaving no mount behind.
. "$(dirname "$0")/lib.sh"
lib_init
command -v python3 > /dev/null || skip "python3 is needed to read the JSON"
SW=/sys/module/fuse/parameters/enable_uring
WANT=${FUSE_TRANSPORT:-auto}
if [ "$WANT" = auto ]; then
	WANT=classic
	[ "$(cat $SW 2>/dev/null)" = Y ] && WANT=uring
fi
small_conf() { # TRANSPORT: a 16 MiB namespace, nothing else
	FUSE_TRANSPORT=$1 conf_sim nvme0 16M
}
stat_of() { # KEY: a counter of stats' "fuse" object
	ctl stats --json > "$TMP/s.json" || return 1
	json "$TMP/s.json" "d['fuse']['$1']"
}
ram_conf() { # a 64 MiB RAM namespace of 4 KiB blocks
	conf_sim nvme0 64M namespaces=1 block_size=4096 backing=ram
}
ram_conf
daemon_start nvme0n1 || { fail "start"; finish; }
F=$MNT/nvme0n1

ctl status --json > "$TMP/st.json" || fail "status"
[ "$(json "$TMP/st.json" 'd["transport"]')" = "$WANT" ] ||
	fail "status: transport $(json "$TMP/st.json" 'd.get("transport")'), want $WANT"
ctl status | grep -q "^transport *$WANT\$" || fail "status (text): no 'transport $WANT' line"
[ "$(stat_of transport)" = "$WANT" ] || fail "stats: transport"

head -c $((8 << 20)) /dev/urandom > "$TMP/data"
c0=$(stat_of copy_bytes)
r0=$(stat_of ring_requests)
dd if="$TMP/data" of="$F" bs=64k oflag=direct conv=notrunc status=none || fail "aligned direct write"
dd if="$F" of="$TMP/back" bs=4k count=2048 iflag=direct status=none || fail "aligned direct read"
cmp "$TMP/data" "$TMP/back" || fail "aligned read back differs"
c1=$(stat_of copy_bytes)
r1=$(stat_of ring_requests)
[ "$c1" = "$c0" ] || fail "aligned I/O over $WANT copied $((c1 - c0)) bytes in user space"
if [ "$WANT" = uring ]; then
	# 128 writes and 2048 reads at least
	[ $((r1 - r0)) -ge 2176 ] || fail "ring requests moved by $((r1 - r0)), want >= 2176"
else
	[ "$r1" = 0 ] || fail "ring requests $r1 over /dev/fuse"
fi
# 512 bytes at offset 512 of a 4 KiB-block namespace: read into a block
# buffer and copied out of it
dd if="$F" of="$TMP/part" bs=512 skip=1 count=1 iflag=direct status=none || fail "unaligned read"
cmp -n 512 -i 512:0 "$TMP/data" "$TMP/part" || fail "unaligned read differs"
c2=$(stat_of copy_bytes)
if [ "$WANT" = uring ]; then
	[ $((c2 - c1)) -ge 512 ] || fail "the unaligned read's copy is not counted ($((c2 - c1)) bytes)"
else
	# /dev/fuse answers from inside the DMA buffer
	[ "$c2" = "$c1" ] || fail "a read over /dev/fuse copied $((c2 - c1)) bytes"
fi

ctl queues --json > "$TMP/q.json" || fail "queues"
nq=$(json "$TMP/q.json" 'len(d["fuse_queues"])')
if [ "$WANT" = uring ]; then
	ncpu=$(python3 -c 'import sys; s=open("/sys/devices/system/cpu/possible").read().strip(); print(max(int(p.split("-")[-1]) for p in s.split(","))+1)')
	[ "$nq" = "$ncpu" ] || fail "queues: $nq FUSE queues, want one per possible CPU ($ncpu)"
	[ "$(json "$TMP/q.json" 'all(q["reactor"] == 0 for q in d["fuse_queues"])')" = True ] ||
		fail "queues: one reactor, but a FUSE queue maps elsewhere"
	ctl queues | grep -q "FUSE transport uring" || fail "queues (text): transport"
else
	[ "$nq" = 0 ] || fail "queues: $nq FUSE queues over /dev/fuse"
fi
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exit $DAEMON_RC"

if [ "$WANT" = classic ]; then
	FUSE_QD=1
	ram_conf
	unset FUSE_QD
	daemon_start nvme0n1 || { fail "start with one landing buffer"; finish; }
	c0=$(stat_of copy_bytes)
	ctl inject nvme0 delay 300 > /dev/null || fail "inject delay 300"
	pids=
	for k in 0 1 2 3; do
		dd if="$TMP/data" of="$F" bs=1M skip=$k seek=$k count=1 oflag=direct conv=notrunc \
			status=none &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || fail "a concurrent write failed"; done
	ctl inject nvme0 delay 0 > /dev/null || fail "inject delay 0"
	c1=$(stat_of copy_bytes)
	# at least one write waited for the buffer, at least one had it
	[ $((c1 - c0)) -ge $((1 << 20)) ] && [ $((c1 - c0)) -le $((3 << 20)) ] ||
		fail "one landing buffer, four 1 MiB writes at once: $((c1 - c0)) bytes copied, want 1-3 MiB"
	dd if="$F" of="$TMP/back" bs=1M count=4 iflag=direct status=none || fail "read back"
	cmp -n $((4 << 20)) "$TMP/data" "$TMP/back" || fail "four concurrent writes read back wrong"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "one landing buffer: daemon exit $DAEMON_RC"
fi

# the kernel switch off: uring refuses, auto falls back and says why
if [ "$(id -u)" = 0 ] && [ -w $SW ]; then
	old=$(cat $SW)
	trap 'echo "$old" > $SW; lib_cleanup' EXIT
	echo N > $SW
	small_conf uring
	: > "$LOG"
	if FUSE_TRANSPORT=uring daemon_start nvme0n1 > /dev/null; then
		fail "fuse_transport = uring started with enable_uring off"
		daemon_stop
	fi
	grep -q "fuse_transport = uring:.*enable_uring" "$LOG" ||
		fail "no message naming the switch: $(tail -n 3 "$LOG")"
	small_conf auto
	: > "$LOG"
	FUSE_TRANSPORT=auto daemon_start nvme0n1 || fail "auto with enable_uring off did not start"
	head -c 4096 "$MNT/nvme0n1" > /dev/null || fail "auto: read"
	grep -q "io_uring not used: the kernel's switch is off.*enable_uring" "$LOG" ||
		fail "auto: no fallback line: $(grep fuse "$LOG")"
	[ "$(grep -c "serving over" "$LOG")" = 1 ] && grep -q "serving over /dev/fuse" "$LOG" ||
		fail "auto: not exactly one 'serving over' line, for /dev/fuse: $(grep fuse "$LOG")"
	daemon_stop
	echo "$old" > $SW

	# the switch on but io_uring refused to this process (the sysctl
	# kernel.io_uring_disabled = 2): the rings cannot be set up; auto
	# serves over /dev/fuse saying why, uring does not start
	IOD=/proc/sys/kernel/io_uring_disabled
	if [ -w $IOD ]; then
		oldiod=$(cat $IOD)
		trap 'echo "$old" > $SW; echo "$oldiod" > $IOD; lib_cleanup' EXIT
		echo Y > $SW
		echo 2 > $IOD
		: > "$LOG"
		small_conf auto
		FUSE_TRANSPORT=auto daemon_start nvme0n1 || fail "auto without io_uring did not start"
		head -c 4096 "$MNT/nvme0n1" > /dev/null || fail "auto without io_uring: read"
		grep -q "no io_uring transport" "$LOG" || fail "auto without io_uring: no warning: $(grep fuse "$LOG")"
		grep -q "serving over /dev/fuse" "$LOG" || fail "auto without io_uring: not serving over /dev/fuse"
		daemon_stop
		[ "$DAEMON_RC" = 0 ] || fail "auto without io_uring: exit $DAEMON_RC"
		small_conf uring
		: > "$LOG"
		if FUSE_TRANSPORT=uring daemon_start nvme0n1 > /dev/null; then
			fail "fuse_transport = uring started without io_uring"
			daemon_stop
		fi
		fuse_mounted && fail "uring without io_uring left a mount behind"
		echo "$oldiod" > $IOD
		echo "$old" > $SW
	fi
fi
finish
