#!/bin/sh
# t-backup.sh - the backup recipe of docs/operations.md ("Backups"), as
# written there: ext4 on a loop device over a namespace file, a writer busy
# in it; fsfreeze -f, cp of the namespace file, fsfreeze -u.  The copy is a
# clean file system (e2fsck -fn) holding every file written before the
# freeze with its checksum; the writer went on after the thaw; then, after
# more writes, cp -pu copies the changed namespace again (its mtime moved)
# and the new copy is clean too.
. "$(dirname "$0")/lib.sh"
lib_init
command -v mkfs.ext4 > /dev/null || skip "no mkfs.ext4 (e2fsprogs)"
command -v fsfreeze > /dev/null || skip "no fsfreeze (util-linux)"
command -v losetup > /dev/null || skip "no losetup"
conf_sim nvme0 64M block_size=4096
daemon_start nvme0n1 || { fail "start"; finish; }
LOOP= CLOOP= WPID=
FSMNT=$TMP/fs CMNT=$TMP/copyfs
cleanup_backup() {
	[ -n "$WPID" ] && kill "$WPID" 2> /dev/null
	fsfreeze -u "$FSMNT" 2> /dev/null
	for m in "$CMNT" "$FSMNT"; do mountpoint -q "$m" 2> /dev/null && umount "$m"; done
	for l in "$CLOOP" "$LOOP"; do [ -n "$l" ] && losetup -d "$l" 2> /dev/null; done
	lib_cleanup
}
trap cleanup_backup EXIT
LOOP=$(losetup --find --show --direct-io=on --sector-size 4096 "$MNT/nvme0n1") ||
	skip "cannot set up a loop device"
mkdir -p "$FSMNT" "$CMNT"
timeout 60 mkfs.ext4 -q -F -E nodiscard "$LOOP" || { fail "mkfs.ext4"; finish; }
mount -t ext4 "$LOOP" "$FSMNT" || { fail "mount ext4"; finish; }

# a writer that keeps the file system busy: a new 64 KiB file every pass,
# each with a checksum line written after it (a file without one was in
# flight and need not be in the copy)
mkdir "$FSMNT/w"
(
	i=0
	while :; do
		i=$((i + 1))
		head -c 65536 /dev/urandom > "$FSMNT/w/f$i" || exit 0
		(cd "$FSMNT/w" && sha256sum "f$i" >> sums) || exit 0
		[ $i -lt 400 ] || exit 0
	done
) &
WPID=$!
# wait until it has written a few (at most 30 s)
i=0
while [ "$(wc -l < "$FSMNT/w/sums" 2> /dev/null || echo 0)" -lt 10 ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done

fsfreeze -f "$FSMNT" || fail "fsfreeze -f"
before=$(wc -l < "$FSMNT/w/sums")
cp -p "$MNT/nvme0n1" "$TMP/copy.img" || fail "cp of the frozen namespace"
fsfreeze -u "$FSMNT" || fail "fsfreeze -u"
echo "ok: copied with $before files written"

e2fsck -fn "$TMP/copy.img" > "$TMP/fsck.log" 2>&1 ||
	{ fail "the copy is not a clean file system"; tail -n 20 "$TMP/fsck.log"; }
CLOOP=$(losetup --find --show -r "$TMP/copy.img") || fail "loop device on the copy"
mount -t ext4 -o ro,noload "$CLOOP" "$CMNT" || fail "mount the copy"
n=$(wc -l < "$CMNT/w/sums")
[ "$n" -ge "$before" ] || fail "the copy has $n checksums, $before were written before the freeze"
(cd "$CMNT/w" && sha256sum -c --quiet sums) || fail "a file of the copy differs from its checksum"
echo "ok: the copy holds $n files, each with its checksum"
umount "$CMNT" && losetup -d "$CLOOP" && CLOOP=

# the writer went on after the thaw
i=0
while [ "$(wc -l < "$FSMNT/w/sums")" -le "$before" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ "$(wc -l < "$FSMNT/w/sums")" -gt "$before" ] || fail "the writer did not go on after the thaw"

# the next backup: the namespace changed, so cp -pu copies it again
sync -f "$FSMNT"
fsfreeze -f "$FSMNT" || fail "fsfreeze -f (again)"
out=$(cp -puv "$MNT/nvme0n1" "$TMP/copy.img")
fsfreeze -u "$FSMNT" || fail "fsfreeze -u (again)"
[ -n "$out" ] || fail "cp -pu skipped the changed namespace"
e2fsck -fn "$TMP/copy.img" > "$TMP/fsck.log" 2>&1 ||
	{ fail "the second copy is not a clean file system"; tail -n 20 "$TMP/fsck.log"; }
echo "ok: second backup: $out"

wait "$WPID"
WPID=
umount "$FSMNT" || fail "umount"
losetup -d "$LOOP" && LOOP=
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"
finish
