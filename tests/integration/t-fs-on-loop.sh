#!/bin/sh
# t-fs-on-loop.sh - a real file system on a loop device over the namespace
# file, through a controller reset.
#
# ext4 is made on /dev/loopN backed by the FUSE file (direct I/O: every
# block goes through nvmefsd), a tree of files with known checksums is
# copied in while the controller is made slower than io_timeout_ms for a
# while (the engine aborts, resets and resubmits: ext4 must see no error),
# then again while it is put in controller fatal status.  After an unmount,
# fsck must find the file system clean; after a remount with the page cache
# dropped, every file must read back with its checksum.  (A spell longer than
# the retries fails I/O with EIO by design: t-fault-slow covers that.)
. "$(dirname "$0")/lib.sh"
lib_init
command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4 (e2fsprogs)"
command -v losetup >/dev/null || skip "no losetup"
# a second: a busy machine can hold a command that long; the slow spell
# below must stay shorter than the retries last
IO_TIMEOUT=1000
conf_sim nvme0 256M block_size=4096 exec=thread
daemon_start nvme0n1 || { fail "start"; finish; }
K0=$(dmesg 2>/dev/null | wc -l)
LOOP=
FSMNT=$TMP/fs
cleanup_loop() {
	mountpoint -q "$FSMNT" 2>/dev/null && umount "$FSMNT"
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
	lib_cleanup
}
trap cleanup_loop EXIT
LOOP=$(losetup --find --show --direct-io=on "$MNT/nvme0n1") || skip "cannot set up a loop device"
mkdir -p "$FSMNT" "$TMP/src"
timeout 60 mkfs.ext4 -q -F -E nodiscard "$LOOP" || { fail "mkfs.ext4"; finish; }
mount -t ext4 "$LOOP" "$FSMNT" || { fail "mount ext4"; finish; }

# a tree of files: sizes from 1 KiB to 8 MiB
i=0
for kib in 1 3 4 17 64 129 512 1000 2048 8192; do
	for n in 1 2 3; do
		i=$((i + 1))
		head -c $((kib * 1024 + n * 7)) /dev/urandom > "$TMP/src/f$i"
	done
done
(cd "$TMP/src" && sha256sum f* > "$TMP/sums")

# copy 1: the device turns slow (every command 3x the timeout) for 0.7 s, a
# spell shorter than the retries last (io_retries 3: four tries, each a
# timeout plus an abort's grace), so every command must end well
CTL_TIMEOUT=120 ctl inject nvme0 delay $((IO_TIMEOUT * 3)) > /dev/null ||
	fail "inject delay"
(sleep 0.7; ctl inject nvme0 clear > /dev/null) &
CLR=$!
timeout 300 cp -r "$TMP/src" "$FSMNT/a" || fail "cp while slow"
timeout 120 sync -f "$FSMNT/a" || fail "sync while slow"
wait $CLR

# copy 2: controller fatal status in the middle
(sleep 0.3; ctl inject nvme0 cfs > /dev/null) &
CFS=$!
timeout 300 cp -r "$TMP/src" "$FSMNT/b" || fail "cp across CFS"
timeout 120 sync -f "$FSMNT/b" || fail "sync across CFS"
wait $CFS
ctl --json stats > "$TMP/stats.json" || fail "stats"
python3 - "$TMP/stats.json" <<'PY' || fail "no reset seen: the faults did not bite"
import json, sys
d = json.load(open(sys.argv[1]))
r = sum(c.get("recovery", c).get("resets_started", 0) for c in d.get("controllers", []))
print("resets started:", r)
sys.exit(0 if r >= 1 else 1)
PY
# what the kernel said since the start: no I/O error on the loop device, no ext4 error
dmesg 2>/dev/null | tail -n +$((K0 + 1)) | grep -i "$(basename "$LOOP")" |
	grep -i "error" && fail "the kernel saw I/O errors on $LOOP"

umount "$FSMNT" || fail "umount"
timeout 120 fsck.ext4 -f -n "$LOOP" > "$TMP/fsck.log" 2>&1 || { cat "$TMP/fsck.log"; fail "fsck found problems"; }
echo 3 > /proc/sys/vm/drop_caches
# (a mount right after the umount and fsck has been refused as busy on a
# loaded machine: the device is let go of a moment later; tried again for
# up to 30 s)
remount() { mount -t ext4 -o ro "$LOOP" "$FSMNT" 2> "$TMP/remount.err"; }
wait_until 30 remount || { cat "$TMP/remount.err"; fail "remount"; finish; }
for d in a b; do
	(cd "$FSMNT/$d" && sha256sum -c --quiet "$TMP/sums") || fail "copy $d: checksums differ"
done
umount "$FSMNT"
losetup -d "$LOOP" && LOOP=
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exit $DAEMON_RC"
finish
