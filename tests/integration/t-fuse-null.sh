#!/bin/sh
# t-fuse-null.sh - the benchmarks' null server (bench/fuse-null.c) serves
# what its ratios claim, on each of its transports: libfuse's loop, raw
# readers on clones of /dev/fuse (-r) and, in the io_uring suite, its rings
# (-u), also sleeping in epoll as an event loop does (-u -e).  Per transport: reads return zeroes, writes are taken and dropped,
# a read past the end returns nothing, the file has the size asked for, and
# at SIGTERM it unmounts, exits 0 and counts the requests where they came
# (-r: over its readers; -u: over the rings, not /dev/fuse).
. "$(dirname "$0")/lib.sh"
lib_init
NULLD=$BUILD/tools/fuse-null
mkdir -p "$MNT"
[ -x "$NULLD" ] || skip "no $NULLD (make builds it)"
NPID=
trap '[ -z "$NPID" ] || kill -9 $NPID 2>/dev/null; fusermount3 -u "$MNT" 2>/dev/null; lib_cleanup' EXIT

null_check() { # NAME OPTIONS...
	name=$1
	shift
	"$NULLD" "$@" -s 64M "$MNT" > "$TMP/null.log" 2>&1 &
	NPID=$!
	i=0
	while [ ! -e "$MNT/null" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	if [ ! -e "$MNT/null" ]; then
		fail "$name: no $MNT/null after 10 s: $(tail -n 3 "$TMP/null.log")"
		kill -9 $NPID 2>/dev/null
		wait $NPID 2>/dev/null
		NPID=
		fusermount3 -u "$MNT" 2>/dev/null
		return
	fi
	[ "$(stat -c %s "$MNT/null")" = $((64 << 20)) ] || fail "$name: size $(stat -c %s "$MNT/null")"
	dd if="$MNT/null" of="$TMP/r" bs=1M count=8 iflag=direct status=none ||
		fail "$name: reading"
	cmp -s -n $((8 << 20)) "$TMP/r" /dev/zero || fail "$name: a read returned something else than zeroes"
	[ "$(stat -c %s "$TMP/r")" = $((8 << 20)) ] || fail "$name: read $(stat -c %s "$TMP/r") bytes"
	head -c $((4 << 20)) /dev/urandom > "$TMP/w"
	dd if="$TMP/w" of="$MNT/null" bs=1M oflag=direct conv=notrunc status=none ||
		fail "$name: writing"
	# written data is dropped: the buffers it went through read as zeroes
	dd if="$MNT/null" of="$TMP/r" bs=1M count=4 iflag=direct status=none
	cmp -s -n $((4 << 20)) "$TMP/r" /dev/zero || fail "$name: a read after a write is not zeroes"
	n=$(dd if="$MNT/null" bs=4k skip=$((16 << 10)) count=1 iflag=direct status=none | wc -c)
	[ "$n" = 0 ] || fail "$name: a read at the end returned $n bytes"
	kill -TERM $NPID
	wait $NPID
	rc=$?
	NPID=
	[ $rc = 0 ] || fail "$name: exit status $rc after SIGTERM: $(tail -n 3 "$TMP/null.log")"
	fuse_mounted && fail "$name: still mounted after it exited"
	echo "$name: $(grep -v '^fuse-null: io_uring queue' "$TMP/null.log" | tr '\n' ' ')"
}

# the reads and writes of the counts line SED-EXPRESSION picks: at least the
# 12 reads and 4 writes of 1 MiB above
counts_check() { # NAME SED-EXPRESSION
	c=$(sed -n "$2" "$TMP/null.log")
	r=${c%% *}
	w=${c#* }
	[ -n "$c" ] && [ "${r:-0}" -ge 12 ] && [ "${w:-0}" -ge 4 ] ||
		fail "$1: requests not counted where they came: $(cat "$TMP/null.log")"
}

null_check libfuse -t 2
null_check raw -r -t 2
counts_check raw 's/^fuse-null: \/dev\/fuse: [0-9]* requests (\([0-9]*\) reads, \([0-9]*\) writes.* over 2 readers$/\1 \2/p'
if [ "${FUSE_TRANSPORT:-}" = uring ]; then
	null_check uring -u -d 4
	counts_check uring 's/^fuse-null: io_uring: [0-9]* requests (\([0-9]*\) reads, \([0-9]*\) writes.*/\1 \2/p'
	grep -q '^fuse-null: /dev/fuse: [0-9]* requests (1 INIT, 0 reads, 0 writes' "$TMP/null.log" ||
		fail "uring: reads or writes came over /dev/fuse: $(cat "$TMP/null.log")"
	null_check uring-epoll -u -e -d 4
	counts_check uring-epoll 's/^fuse-null: io_uring: [0-9]* requests (\([0-9]*\) reads, \([0-9]*\) writes.*/\1 \2/p'
fi
timeout 10 "$NULLD" -e -r "$MNT" 2> /dev/null
rc=$?
[ $rc = 2 ] || { fail "-e without -u: exit $rc, want 2 (a usage error)"; fusermount3 -u "$MNT" 2>/dev/null; }
finish
