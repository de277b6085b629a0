#!/bin/sh
# t-crash-adopt-fs.sh - ext4 on a loop device over a namespace file lives
# through kill -9 of nvmefsd: under the fd store stand-in
# (tests/helpers/fdstore.c) the restarted daemon adopts the mount, so the
# loop device's requests pause and complete, and the file system never
# sees an error.
#
# ext4 on /dev/loopN (direct I/O: every block goes through nvmefsd) over a
# file-backed namespace; tests/helpers/fs-churn.py runs random file system
# operations with fsync, fdatasync and sync (fixed seed ADOPT_SEED) for
# CHURN_SECONDS (20) and keeps a model of every file; the daemon is killed
# with SIGKILL FS_KILLS times (2; SOAK=1: 10) at seeded moments.  Then: the
# workload ended without an error, the kernel logged no I/O error on the
# loop device and no ext4 error, every kill was adopted, fsck -f finds the
# file system clean after the unmount, and after a remount with the page
# cache dropped every file matches the model.  /dev/fuse only: an io_uring
# connection is not adopted (t-crash-adopt checks its refusal).
. "$(dirname "$0")/lib.sh"
lib_init
[ "${FUSE_TRANSPORT:-auto}" = uring ] && skip "io_uring connections are not adopted (t-crash-adopt checks the refusal)"
command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4 (e2fsprogs)"
command -v losetup >/dev/null || skip "no losetup"
command -v python3 >/dev/null || skip "no python3"
. "$(dirname "$0")/fdstore-lib.sh"
SEED=${ADOPT_SEED:-1}
KILLS=${FS_KILLS:-2}
[ "${SOAK:-0}" = 1 ] && KILLS=10
SECS=${CHURN_SECONDS:-20}
[ "${SOAK:-0}" = 1 ] && SECS=60
CHURN=$(dirname "$0")/../helpers/fs-churn.py
conf_sim nvme0 256M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread
LOOP=
FSMNT=$TMP/fs
cleanup_fs() {
	mountpoint -q "$FSMNT" 2>/dev/null && umount "$FSMNT"
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
	if [ -n "$SPID" ]; then kill -9 "$SPID" 2>/dev/null; fi
	lib_cleanup
}
trap cleanup_fs EXIT

store_start -a -n $((KILLS + 3)) || finish
K0=$(dmesg 2>/dev/null | wc -l)
LOOP=$(losetup --find --show --direct-io=on "$MNT/nvme0n1") || skip "cannot set up a loop device"
mkdir -p "$FSMNT"
timeout 60 mkfs.ext4 -q -F -E nodiscard "$LOOP" || { fail "mkfs.ext4"; finish; }
mount -t ext4 "$LOOP" "$FSMNT" || { fail "mount ext4"; finish; }

timeout -k 5 $((SECS + 60 + KILLS * 10)) python3 "$CHURN" run "$FSMNT" "$SEED" "$SECS" "$TMP/model.json" \
	> "$TMP/churn.out" 2>&1 &
CP=$!
DELAYS=$(awk -v s="$SEED" -v n="$KILLS" -v t="$SECS" \
	'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%.2f ", 1 + rand() * (t * 0.8 / n) }')
k=0
for t in $DELAYS; do
	sleep "$t"
	kill -0 "$CP" 2>/dev/null || { fail "the workload ended before kill $((k + 1))"; break; }
	kill -9 "$DPID"
	k=$((k + 1))
	new_pid
	wait_for "the kernel resends the requests" $k 15 || { fail "kill $k: not adopted within 15 s"; break; }
done
wait "$CP"
crc=$?
cat "$TMP/churn.out"
[ $crc = 0 ] || fail "the workload failed (exit $crc)"
timeout 60 sync -f "$FSMNT" || fail "syncfs"
n=$(grep -c "adopting FUSE connection" "$LOG")
echo "$k kills, $n adoptions"
[ "$n" = "$KILLS" ] || fail "$n adoptions for $KILLS kills"
grep -q "not adopting" "$LOG" && fail "an adoption was refused: $(grep "not adopting" "$LOG")"

dmesg 2>/dev/null | tail -n +$((K0 + 1)) > "$TMP/dmesg"
grep -i "$(basename "$LOOP")" "$TMP/dmesg" | grep -i "error" && fail "the kernel saw I/O errors on $LOOP"
grep -i "EXT4-fs error" "$TMP/dmesg" && fail "ext4 reported an error"
umount "$FSMNT" || fail "umount"
timeout 120 fsck.ext4 -f -n "$LOOP" > "$TMP/fsck.log" 2>&1 || { cat "$TMP/fsck.log"; fail "fsck found problems"; }
echo 3 > /proc/sys/vm/drop_caches
mount -t ext4 -o ro "$LOOP" "$FSMNT" || { fail "remount"; finish; }
python3 "$CHURN" check "$FSMNT" "$TMP/model.json" 2>&1 || fail "the files differ from the model (exit $?)"
umount "$FSMNT"
losetup -d "$LOOP" && LOOP=
store_finish
