#!/bin/sh
# t-fuse-perms.sh - the kernel enforces file_mode/owner/group
# (default_permissions, allow_other): nobody in the file's group can read and
# write a 0660 namespace file, nobody outside it can do neither.
. "$(dirname "$0")/lib.sh"
lib_init
command -v setpriv >/dev/null || skip "no setpriv (util-linux)"
G=4242
FILE_MODE=0660 FILE_GROUP=$G conf_sim nvme0 4M namespaces=1 block_size=4096 backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
F=$MNT/nvme0n1
as_member() { setpriv --reuid=65534 --regid=65534 --groups=$G -- "$@"; }
as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
head -c 8192 /dev/urandom > "$TMP/d"
chmod 644 "$TMP/d"
as_member dd if="$TMP/d" of="$F" bs=4096 conv=notrunc status=none || fail "member cannot write"
as_member cmp -n 8192 "$TMP/d" "$F" || fail "member reads other data"
as_other dd if="$F" of=/dev/null bs=4096 count=1 status=none 2>"$TMP/e1" && fail "outsider can read"
grep -q "Permission denied" "$TMP/e1" || fail "outsider read: $(cat "$TMP/e1")"
as_other dd if=/dev/zero of="$F" bs=4096 count=1 conv=notrunc status=none 2>"$TMP/e2" &&
	fail "outsider can write"
grep -q "Permission denied" "$TMP/e2" || fail "outsider write: $(cat "$TMP/e2")"
cmp -n 8192 "$TMP/d" "$F" || fail "data changed by the outsider"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
