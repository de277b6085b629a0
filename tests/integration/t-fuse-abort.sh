#!/bin/sh
# t-fuse-abort.sh - the mount taken away under load, while fio has 64
# requests in flight: the FUSE connection aborted through fusectl
# (/sys/fs/fuse/connections/N/abort), where fio must fail at once (no request
# hangs, whichever transport held it); and the mount detached from outside
# (umount -l), where fio's open file keeps working (its I/O goes on after
# the unmount, and it ends without an error when told to).  Either way
# the daemon notices by itself once the connection ends, says so, and exits
# 0 within 10 s, and a new daemon mounts again over the same mountpoint.
. "$(dirname "$0")/lib.sh"
lib_init
command -v fio >/dev/null || skip "no fio"
[ "$(id -u)" = 0 ] || skip "needs root (fusectl, umount)"
CONNS=/sys/fs/fuse/connections
if [ ! -d $CONNS ] || [ -z "$(ls -A $CONNS 2>/dev/null)" ] && ! mountpoint -q $CONNS; then
	mount -t fusectl fusectl $CONNS 2>/dev/null || skip "no fusectl at $CONNS"
fi
QD=64 conf_sim nvme0 64M namespaces=1 block_size=4096 backing=ram exec=thread

# the connection's number: the mount's minor device number
conn_of() { awk -v m="$MNT" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo; }

# wait_exit SECONDS: the daemon ends by itself; DAEMON_RC is its status
wait_exit() {
	i=0
	while kill -0 "$DPID" 2>/dev/null && [ $i -lt $(($1 * 10)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$DPID" 2>/dev/null; then
		fail "$2: the daemon is still running $1 s after losing its mount"
		daemon_stop
		return
	fi
	wait "$DPID"
	DAEMON_RC=$?
	DPID=
}

head -c $((4 << 20)) /dev/urandom > "$TMP/data"
for how in abort umount; do
	: > "$LOG"
	daemon_start nvme0n1 || { fail "$how: start"; continue; }
	dd if="$TMP/data" of="$MNT/nvme0n1" bs=1M oflag=direct conv=notrunc status=none ||
		fail "$how: first write"
	dd if="$MNT/nvme0n1" of="$TMP/back" bs=1M count=4 iflag=direct status=none
	cmp -s "$TMP/data" "$TMP/back" || fail "$how: read back before the $how"
	conn=$(conn_of)
	c0=$(completed)
	# runs until the abort ends it, or SIGINT after the unmount (no
	# timeout(1) around it, which would not pass SIGINT on as fio wants it)
	env $(fio_env) fio --name=load --filename="$MNT/nvme0n1" --ioengine=libaio --direct=1 --allow_file_create=0 \
		--rw=randrw --bs=4k --iodepth=64 --offset=8m --size=32m --time_based --runtime=120 \
		> "$TMP/fio.out" 2>&1 &
	FIO=$!
	# fio's I/O under way (a condition, not a time: fio may take seconds
	# to start on a busy machine)
	wait_io "$c0" 64
	t0=$(date +%s)
	if [ $how = abort ]; then
		[ -n "$conn" ] && [ -w "$CONNS/$conn/abort" ] || { fail "no $CONNS/$conn/abort"; kill "$FIO"; }
		echo 1 > "$CONNS/$conn/abort"
	else
		umount -l "$MNT" || fail "umount -l"
	fi
	if [ $how = umount ]; then
		# the open file keeps working after the lazy unmount
		c1=$(completed)
		wait_io "$c1" 64
		kill -INT "$FIO"
	fi
	# ended at once by the abort; 30 s: a request hangs
	i=0
	while kill -0 "$FIO" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$FIO" 2>/dev/null; then
		kill -9 "$FIO"
		wait "$FIO"
		rc=124
	else
		wait "$FIO"
		rc=$?
	fi
	echo "$how: fio ended (exit $rc) $(($(date +%s) - t0)) s after it: $(grep -m1 -o 'err=[^(]*' "$TMP/fio.out")"
	[ $rc = 124 ] && fail "$how: fio still running 30 s after the $how (a request hangs)"
	if [ $how = abort ]; then
		[ $rc = 0 ] && fail "abort: fio saw no error after the connection was aborted"
	else
		# a lazy unmount detaches the name only: the open file keeps working,
		# and the connection ends when fio closes it.  fio ends on SIGINT
		# with 0 or 128 (whichever; its report says how its job went)
		case $rc in 0 | 128 | 130) ;; *) fail "umount: fio exit $rc" ;; esac
		grep -q 'err= 0' "$TMP/fio.out" ||
			fail "umount: fio's open file failed after a lazy unmount: $(grep -m1 err "$TMP/fio.out")"
	fi
	wait_exit 10 "$how"
	echo "$how: the daemon exited $DAEMON_RC: $(grep -m1 'session ended' "$LOG")"
	[ "$DAEMON_RC" = 0 ] || fail "$how: daemon exit $DAEMON_RC"
	grep -q "the session ended" "$LOG" || fail "$how: the daemon did not say the session ended"
	daemon_start nvme0n1 || { fail "$how: restart over the old mountpoint"; continue; }
	dd if="$MNT/nvme0n1" of=/dev/null bs=1M count=4 iflag=direct status=none ||
		fail "$how: read after restart"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "$how: restarted daemon exit $DAEMON_RC"
done
finish
