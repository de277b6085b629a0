#!/bin/sh
# t-fuse-basic.sh - one RAM namespace: the mount shows it as a regular file
# of the namespace's size, mode and group; 64 MiB of random data written with
# dd (buffered, then O_DIRECT) read back identical both ways; nothing can be
# created, removed, truncated or chmod'ed; statfs counts the capacity.
. "$(dirname "$0")/lib.sh"
lib_init
FILE_MODE=0640 FILE_GROUP=4242 conf_sim nvme0 96M namespaces=1 block_size=4096 backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
F=$MNT/nvme0n1

[ "$(ls "$MNT")" = nvme0n1 ] || fail "listing: $(ls "$MNT")"
set -- $(stat -c '%s %a %u %g %o' "$F")
[ "$1" = $((96 << 20)) ] || fail "size $1"
[ "$2" = 640 ] || fail "mode $2"
[ "$3" = 0 ] || fail "uid $3"
[ "$4" = 4242 ] || fail "gid $4"
[ "$5" -ge 4096 ] || fail "st_blksize $5"
[ "$(stat -c %F "$F")" = "regular file" ] || fail "not a regular file"
[ "$(stat -c %a "$MNT")" = 755 ] || fail "root dir mode"

head -c $((64 << 20)) /dev/urandom > "$TMP/data"
dd if="$TMP/data" of="$F" bs=1M conv=notrunc status=none || fail "buffered dd write"
cmp -n $((64 << 20)) "$TMP/data" "$F" || fail "buffered read back differs"
dd if="$F" of="$TMP/back" bs=1M count=64 iflag=direct status=none || fail "direct dd read"
cmp "$TMP/data" "$TMP/back" || fail "direct read back differs"

head -c $((64 << 20)) /dev/urandom > "$TMP/data2"
dd if="$TMP/data2" of="$F" bs=4M oflag=direct conv=notrunc status=none || fail "direct dd write"
dd if="$F" of="$TMP/back2" bs=256k count=256 status=none || fail "buffered dd read"
cmp "$TMP/data2" "$TMP/back2" || fail "direct write read back differs"
# the tail of the namespace was never written: zeroes
dd if="$F" bs=1M skip=64 count=32 status=none > "$TMP/tail"
head -c $((32 << 20)) /dev/zero | cmp -s - "$TMP/tail" || fail "unwritten tail is not zero"
# cp opens with O_TRUNC, which a block device ignores; the data lands
head -c 1M /dev/urandom > "$TMP/small"
cp "$TMP/small" "$F" || fail "cp onto the namespace file"
cmp -n $((1 << 20)) "$TMP/small" "$F" || fail "cp data"
[ "$(stat -c %s "$F")" = $((96 << 20)) ] || fail "size changed after cp"

touch "$MNT/new" 2>/dev/null && fail "create succeeded"
mkdir "$MNT/dir" 2>/dev/null && fail "mkdir succeeded"
rm -f "$F" 2>/dev/null
[ -f "$F" ] || fail "unlink removed the file"
truncate -s 1M "$F" 2>/dev/null && fail "truncate succeeded"
[ "$(stat -c %s "$F")" = $((96 << 20)) ] || fail "size changed after truncate"
chmod 666 "$F" 2>/dev/null && fail "chmod succeeded"
touch "$F" || fail "touch (times only) failed"
[ "$(stat -c %s "$F")" = $((96 << 20)) ] || fail "size changed"
set -- $(stat -f -c '%b %S' "$MNT")
[ $(($1 * $2)) = $((96 << 20)) ] || fail "statfs: $1 blocks of $2"

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
fuse_mounted && fail "still mounted after SIGTERM"
grep -q "stopped" "$LOG" || fail "no 'stopped' line in the log"
finish
