#!/bin/sh
# t-blockdev-cp.sh - a reader that keeps the file open across a `cp` onto it
# (cp opens with O_TRUNC), and then across a bare `: > FILE`, goes on reading
# the whole device, with Linux AIO
# O_DIRECT reads (as qemu aio=native or a database does) and with plain
# pread, and sees what cp wrote; the size it sees does not change.  Done on a
# loop device and on a namespace file of the same size, with the same
# results (tests/helpers/bdev-ops.c).
. "$(dirname "$0")/lib.sh"
lib_init
H=$(tool bdev-ops) || exit 1
S=$((32 << 20))
B=4096
loop_file $S $B
LOOP=$LOOP_DEV
conf_sim nvme0 32M namespaces=1 "block_size=$B" backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
head -c $S /dev/urandom > "$TMP/x0"
head -c $S /dev/urandom > "$TMP/x1"
# digest of [OFF, OFF+LEN) of a regular file, as bdev-ops prints it
digest() { printf 'open x rdonly\npread x %s %s\n' "$2" "$3" | "$H" "$1" | sed -n '2s/.* -> //p'; }
T0=$(digest "$TMP/x0" $((S - B)) $B)
T1=$(digest "$TMP/x1" $((S - B)) $B)
H1=$(digest "$TMP/x1" 0 $B)
[ "$T0" != "$T1" ] || { fail "random data repeated"; finish; }

for t in blk ns; do
	if [ $t = blk ]; then DEV=$LOOP; else DEV=$MNT/nvme0n1; fi
	dd if="$TMP/x0" of="$DEV" bs=1M conv=notrunc,fsync status=none || fail "$t: fill"
	cat > "$TMP/script.$t" <<EOF
open d rdonly,direct
open s rdonly
aioread d $((S - B)) $B
touch $TMP/ready.$t
waitfor $TMP/go.$t
aioread d $((S - B)) $B
aioread d 0 $B
pread s $((S - B)) $B
pread d $((S - 2 * B)) $((2 * B))
size d
size s
aioread d $((S - B)) $B
touch $TMP/ready2.$t
waitfor $TMP/go2.$t
aioread d $((S - B)) $B
pread s $((S - B)) $B
close d
close s
EOF
	"$H" "$DEV" < "$TMP/script.$t" > "$TMP/out.$t" 2>&1 &
	P=$!
	i=0
	while [ ! -e "$TMP/ready.$t" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	[ -e "$TMP/ready.$t" ] || fail "$t: reader did not start"
	cp "$TMP/x1" "$DEV" || fail "$t: cp onto $DEV"
	touch "$TMP/go.$t"
	# a truncating open that nothing stats afterwards (cp fstats the
	# file right after its open, which hides a stale size but for a moment)
	i=0
	while [ ! -e "$TMP/ready2.$t" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	: > "$DEV" || fail "$t: open with O_TRUNC"
	touch "$TMP/go2.$t"
	wait $P || fail "$t: reader exited $?"
	r() { sed -n "${1}s/.* -> //p" "$TMP/out.$t"; }
	[ "$(r 3)" = "$T0" ] || fail "$t: before cp: $(r 3), want $T0"
	[ "$(r 6)" = "$T1" ] || fail "$t: AIO read of the tail after cp: $(r 6), want $T1"
	[ "$(r 7)" = "$H1" ] || fail "$t: AIO read of the head after cp: $(r 7), want $H1"
	[ "$(r 8)" = "$T1" ] || fail "$t: pread of the tail after cp: $(r 8), want $T1"
	[ "$(r 9)" = "$((2 * B)) $(printf 'open x rdonly\npread x %s %s\n' $((S - 2 * B)) $((2 * B)) |
		"$H" "$TMP/x1" | sed -n '2s/.* -> [0-9]* //p')" ] || fail "$t: O_DIRECT pread after cp: $(r 9)"
	[ "$(r 10)" = $S ] || fail "$t: size seen by the AIO reader: $(r 10), want $S"
	[ "$(r 11)" = $S ] || fail "$t: size seen by the sync reader: $(r 11), want $S"
	[ "$(r 12)" = "$T1" ] || fail "$t: AIO read after the size checks: $(r 12), want $T1"
	[ "$(r 15)" = "$T1" ] || fail "$t: AIO read after a bare O_TRUNC open: $(r 15), want $T1"
	[ "$(r 16)" = "$T1" ] || fail "$t: pread after a bare O_TRUNC open: $(r 16), want $T1"
done
grep -v '^touch\|^waitfor' "$TMP/out.blk" > "$TMP/cmp.blk"
grep -v '^touch\|^waitfor' "$TMP/out.ns" > "$TMP/cmp.ns"
diff "$TMP/cmp.blk" "$TMP/cmp.ns" || fail "the reader saw different results on the two"
cmp -s "$TMP/x1" "$MNT/nvme0n1" || fail "namespace holds what cp wrote"
cmp -s "$TMP/x1" "$LOOP" || fail "loop device holds what cp wrote"
echo "AIO and sync readers across cp: block device and namespace file agree"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"
finish
