#!/bin/sh
# t-memlock.sh - who is held to the locked-memory limit (nvmefsd(8), NOTES;
# docs/operations.md section 2): the daemon as root, with CAP_IPC_LOCK,
# starts and serves under a 64 KiB RLIMIT_MEMLOCK; the same daemon without
# CAP_IPC_LOCK (dropped from its bounding set) fails at start, exit 1, with
# the message that names the limit, and starts once the limit is lifted.
. "$(dirname "$0")/lib.sh"
lib_init
command -v prlimit > /dev/null || skip "no prlimit (util-linux)"
command -v setpriv > /dev/null || skip "no setpriv (util-linux)"
REAL=$D
conf_sim nvme0 8M backing=ram
# wrap LIMIT [PREFIX...]: D becomes the daemon under that locked-memory
# limit (soft and hard), started through PREFIX
wrap() {
	lim=$1
	shift
	printf '#!/bin/sh\nexec prlimit --memlock=%s:%s %s "%s" "$@"\n' "$lim" "$lim" "$*" "$REAL" \
		> "$TMP/nvmefsd-wrap"
	chmod +x "$TMP/nvmefsd-wrap"
	D=$TMP/nvmefsd-wrap
}
# CAP_IPC_LOCK out of the bounding set: root keeps every other capability
NOLOCK="setpriv --bounding-set=-ipc_lock"

wrap 65536
daemon_start nvme0n1 || { fail "root under a 64 KiB limit did not start"; finish; }
grep -q "Max locked memory *65536 *65536" /proc/"$DPID"/limits ||
	fail "the daemon's limit is not 64 KiB: $(grep locked /proc/"$DPID"/limits)"
head -c $((1 << 20)) /dev/urandom > "$TMP/data"
dd if="$TMP/data" of="$MNT/nvme0n1" bs=64k oflag=direct conv=notrunc status=none || fail "write"
cmp -n $((1 << 20)) "$TMP/data" "$MNT/nvme0n1" || fail "read back"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"
echo "ok: root (CAP_IPC_LOCK) serves under a 64 KiB locked-memory limit"

wrap 65536 "$NOLOCK"
: > "$LOG"
if daemon_start nvme0n1 > /dev/null; then
	fail "without CAP_IPC_LOCK under 64 KiB: started"
	daemon_stop
else
	[ "${DAEMON_RC:-}" = 1 ] || fail "without CAP_IPC_LOCK under 64 KiB: exit ${DAEMON_RC:-none}, want 1"
	grep -q "dma: cannot lock [0-9]* bytes in memory: Cannot allocate memory (raise RLIMIT_MEMLOCK / LimitMEMLOCK)" "$LOG" ||
		fail "without CAP_IPC_LOCK: no message naming the limit: $(tail -n 5 "$LOG")"
	echo "ok: without CAP_IPC_LOCK under 64 KiB: $(grep 'cannot lock' "$LOG" | head -1 | sed 's/^.*error: //')"
fi
fuse_mounted && { fail "a mount was left"; umount -l "$MNT"; }

# lifting the limit needs CAP_SYS_RESOURCE past the hard limit, which a
# container may not grant
if prlimit --memlock=unlimited:unlimited true 2> /dev/null; then
	wrap unlimited "$NOLOCK"
	: > "$LOG"
	daemon_start nvme0n1 || fail "without CAP_IPC_LOCK and no limit: did not start"
	daemon_stop
	[ "${DAEMON_RC:-}" = 0 ] || fail "without CAP_IPC_LOCK and no limit: exit ${DAEMON_RC:-none}"
	echo "ok: without CAP_IPC_LOCK and no limit: started"
else
	echo "not run: without CAP_IPC_LOCK and no limit (this process may not raise its hard limit)"
fi
finish
