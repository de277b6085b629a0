#!/bin/sh
# t-fuse-mtime.sh - a namespace file's mtime and ctime move with its content,
# so that tools comparing times copy a changed namespace and skip an
# unchanged one: stat right after a buffered dd, an O_DIRECT dd and a punched
# hole shows later times (mtime = ctime), the other namespace's stay, reads
# and repeated stats change nothing; cp -pu skips an unchanged namespace and
# copies a changed one; rsync --dry-run -i lists a changed namespace only.
# On the transport the suite runs (classic, or uring in integration-uring).
. "$(dirname "$0")/lib.sh"
lib_init
conf_sim nvme0 8M namespaces=2 block_size=4096 backing=ram
daemon_start nvme0n1 nvme0n2 || { fail "start"; finish; }
F=$MNT/nvme0n1
G=$MNT/nvme0n2

tm() { stat -c '%.9Y %.9Z' "$1"; }
# later NEW OLD: NEW's mtime is after OLD's, and NEW's mtime is its ctime
later() {
	python3 -c 'import sys
n, o = sys.argv[1].split(), sys.argv[2].split()
sys.exit(0 if n[0] == n[1] and int(n[0].replace(".", "")) > int(o[0].replace(".", "")) else 1)' "$1" "$2"
}
# wait until the clock's second is past the mtime of $1 (at most 3 s), so
# that a tool comparing whole seconds sees the next change too
past_second() {
	s=$(stat -c %Y "$1") i=0
	while [ "$(date +%s)" -le "$s" ] && [ $i -lt 30 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

t0=$(tm "$F")
g0=$(tm "$G")
[ "$(tm "$F")" = "$t0" ] || fail "two stats without a write: $t0, then $(tm "$F")"

dd if=/dev/urandom of="$F" bs=4k count=1 conv=notrunc status=none || fail "buffered dd"
t1=$(tm "$F")
later "$t1" "$t0" || fail "buffered write: times $t0 -> $t1"
dd if=/dev/urandom of="$F" bs=4k count=4 seek=8 oflag=direct conv=notrunc status=none ||
	fail "direct dd"
t2=$(tm "$F")
later "$t2" "$t1" || fail "O_DIRECT write: times $t1 -> $t2"
fallocate -p -o 0 -l 4096 "$F" || fail "punch"
t3=$(tm "$F")
later "$t3" "$t2" || fail "punched hole: times $t2 -> $t3"
cat "$F" > /dev/null
dd if="$F" of=/dev/null bs=64k iflag=direct status=none
[ "$(tm "$F")" = "$t3" ] || fail "reads moved the times: $t3 -> $(tm "$F")"
[ "$(tm "$G")" = "$g0" ] || fail "the other namespace's times moved: $g0 -> $(tm "$G")"
echo "ok: stat after a write: $t0 -> $t1 -> $t2 -> $t3"

# cp -pu: copies when the source is newer than the copy
cp -p "$F" "$TMP/copy" || fail "cp -p"
[ "$(stat -c %.9Y "$TMP/copy")" = "$(stat -c %.9Y "$F")" ] || fail "cp -p kept no mtime"
out=$(cp -puv "$F" "$TMP/copy")
[ -z "$out" ] || fail "cp -pu copied an unchanged namespace: $out"
past_second "$F"
dd if=/dev/urandom of="$F" bs=4k count=1 seek=100 conv=notrunc status=none || fail "dd"
out=$(cp -puv "$F" "$TMP/copy")
[ -n "$out" ] || fail "cp -pu skipped a changed namespace"
cmp -s "$F" "$TMP/copy" || fail "cp -pu: the copy differs"
echo "ok: cp -pu: $out"

# rsync's quick check (size and mtime)
if command -v rsync > /dev/null; then
	rsync -t "$F" "$TMP/r" || fail "rsync"
	out=$(rsync --dry-run -i -t "$F" "$TMP/r")
	[ -z "$out" ] || fail "rsync lists an unchanged namespace: $out"
	past_second "$F"
	dd if=/dev/urandom of="$F" bs=4k count=1 seek=200 oflag=direct conv=notrunc status=none ||
		fail "dd"
	out=$(rsync --dry-run -i -t "$F" "$TMP/r")
	case $out in '>f'*) ;; *) fail "rsync skips a changed namespace: '$out'" ;; esac
	echo "ok: rsync --dry-run -i: $out"
else
	fail "rsync missing (scripts/deps.sh test installs it)"
fi

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"
finish
