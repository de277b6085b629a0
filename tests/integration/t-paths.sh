#!/bin/sh
# t-paths.sh - the daemon (root) refuses backing files and mountpoints that
# another user could redirect, naming the path and the rule, and changes
# nothing it was pointed at:
#   a symbolic link at the backing path (the file it points to keeps its
#   size and content), a link in a parent directory, a file owned by another
#   user, a file in a group- or world-writable directory (sticky or not) or
#   below a directory owned by another user or writable by others without
#   the sticky bit, a FIFO or a directory at the path; a link at the
#   mountpoint, in its parents, or a world-writable parent, and a mountpoint
#   that is not empty (a link at it or not empty: exit 78, a configuration
#   problem the unit does not restart), and an admin socket in a directory
#   others may write (exit 78).  A missing backing file is created
#   mode 0600 and an existing root-owned one is used (both serve I/O), in a
#   private directory below a sticky world-writable one.
# transport-independent: start-up refusals of paths, before the transport serves anything
. "$(dirname "$0")/lib.sh"
lib_init

# refused BACKING WHAT MESSAGE-REGEX: the daemon must exit 78 (the config's
# checks of the paths find it: FILE:LINE: backing = ...), log the message
# and leave no mount behind.  The same walk at the open itself (a path
# changed after the check) is test_mount's.
refused() {
	conf_sim nvme0 1M block_size=4096 "backing=$1"
	: > "$LOG"
	if daemon_start nvme0n1 > /dev/null; then
		fail "$2: the daemon started"
		daemon_stop
		return
	fi
	# found by the config's checks (nvmefs.conf(5)): a config error, which
	# a restart cannot mend
	[ "${DAEMON_RC:-0}" = 78 ] || fail "$2: exit status ${DAEMON_RC:-0}, want 78"
	grep -Eq "$3" "$LOG" || { fail "$2: no message matching '$3'"; tail -n 5 "$LOG"; }
	fuse_mounted && { fail "$2: left a mount behind"; umount -l "$MNT"; }
	echo "ok: $2: $(grep -E "$3" "$LOG" | head -1 | sed 's/^.*\] //')"
}

# a victim the daemon must never grow or expose: 10 bytes of text
V=$TMP/victim
printf 'victim-%03d' 7 > "$V"
cp "$V" "$TMP/victim.orig"
victim_intact() {
	[ "$(stat -c %s "$V")" = 10 ] && cmp -s "$V" "$TMP/victim.orig" ||
		fail "$1: the victim changed (size $(stat -c %s "$V"))"
}

B=$TMP/b
mkdir -m 700 "$B"

ln -s "$V" "$B/link.img"
refused "$B/link.img" "symlink at the backing path" \
	"backing = $B/link.img: $B/link.img is a symbolic link"
victim_intact "symlink at the backing path"

mkdir -m 700 "$TMP/real"
ln -s "$TMP/real" "$TMP/linkdir"
refused "$TMP/linkdir/ns.img" "symlink in a parent" \
	"backing = $TMP/linkdir/ns.img: $TMP/linkdir is a symbolic link"
[ -e "$TMP/real/ns.img" ] && fail "symlink in a parent: created $TMP/real/ns.img"

printf 'owned-by-nobody' > "$B/nobody.img"
chown 65534 "$B/nobody.img"
refused "$B/nobody.img" "file owned by another user" \
	"$B/nobody.img is owned by uid 65534, not root"
[ "$(stat -c %s "$B/nobody.img")" = 15 ] || fail "file owned by another user: it was resized"

for m in 777 1777 770; do
	W=$TMP/w$m
	mkdir "$W"
	chmod $m "$W"
	refused "$W/ns.img" "directory mode $m" \
		"directory $W is writable by group or others \\(mode 0?$m\\)"
	[ -e "$W/ns.img" ] && fail "directory mode $m: created $W/ns.img"
done

# an ancestor writable by others without the sticky bit
mkdir -m 777 "$TMP/open"
mkdir -m 700 "$TMP/open/inner"
refused "$TMP/open/inner/ns.img" "non-sticky writable ancestor" \
	"directory $TMP/open is writable by group or others without the sticky bit"

# a directory on the way owned by another user (it could swap what is below)
mkdir -m 755 "$TMP/theirs"
mkdir -m 700 "$TMP/theirs/inner"
chown 65534 "$TMP/theirs"
refused "$TMP/theirs/inner/ns.img" "directory owned by another user" \
	"directory $TMP/theirs is owned by uid 65534, not root"
[ -e "$TMP/theirs/inner/ns.img" ] && fail "directory owned by another user: created the file"

mkfifo -m 600 "$B/fifo.img"
refused "$B/fifo.img" "FIFO at the path" "$B/fifo.img is a FIFO, not a regular file"
mkdir "$B/dir.img"
refused "$B/dir.img" "directory at the path" "$B/dir.img is a directory, not a regular file"

# what still works: a new file (created 0600, sized), then an existing one,
# in a private directory below a sticky world-writable one (as /tmp)
mkdir -m 1777 "$TMP/sticky"
B=$TMP/sticky/private
mkdir -m 700 "$B"
conf_sim nvme0 1M block_size=4096 "backing=$B/new.img"
: > "$LOG"
if daemon_start nvme0n1; then
	grep -q "sim: created backing file $B/new.img" "$LOG" || fail "new file: no 'created' line"
	[ "$(stat -c '%a %u %s' "$B/new.img")" = "600 0 1048576" ] ||
		fail "new file: $(stat -c 'mode %a uid %u size %s' "$B/new.img")"
	printf 'hello-paths' | dd of="$MNT/nvme0n1" bs=4096 conv=sync,notrunc 2> /dev/null ||
		fail "new file: write"
	daemon_stop
	[ "$(head -c 11 "$B/new.img")" = hello-paths ] || fail "new file: data not in the backing file"
	: > "$LOG"
	if daemon_start nvme0n1; then
		grep -q "created backing file" "$LOG" && fail "existing file: created again"
		[ "$(head -c 11 "$MNT/nvme0n1")" = hello-paths ] || fail "existing file: data not read back"
		daemon_stop
		[ "$DAEMON_RC" = 0 ] || fail "existing file: exit $DAEMON_RC"
	else
		fail "existing root-owned file refused"
	fi
else
	fail "a new backing file in a 0700 root directory refused"
fi

# mountpoints: a link at the mountpoint (found at start: the config's checks
# never look at the mountpoint itself), a link above it, a writable parent
# (found by the config's checks)
conf_mnt() {
	MNT=$1
	conf_sim nvme0 1M backing=ram
	: > "$LOG"
}
mnt_refused() { # WHAT REGEX TARGET-DIR-THAT-MUST-STAY-UNMOUNTED
	if daemon_start nvme0n1 > /dev/null; then
		fail "$1: the daemon started"
		daemon_stop
		return
	fi
	grep -Eq "$2" "$LOG" || { fail "$1: no message matching '$2'"; tail -n 5 "$LOG"; }
	awk -v m="$3" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo &&
		{ fail "$1: mounted on $3"; umount -l "$3"; }
	echo "ok: $1: $(grep -E "$2" "$LOG" | head -1 | sed 's/^.*\] //')"
}
mkdir -m 700 "$TMP/mtarget"
ln -s "$TMP/mtarget" "$TMP/mlink"
conf_mnt "$TMP/mlink"
mnt_refused "symlink at the mountpoint" \
	"$TMP/mlink: mountpoint refused: it is a symbolic link" "$TMP/mtarget"
[ "${DAEMON_RC:-}" = 78 ] || fail "symlink at the mountpoint: exit ${DAEMON_RC:-none}, want 78"
conf_mnt "$TMP/linkdir/mnt"
mnt_refused "symlink above the mountpoint" \
	"mountpoint = $TMP/linkdir/mnt: $TMP/linkdir is a symbolic link" "$TMP/real/mnt"
[ -e "$TMP/real/mnt" ] && fail "symlink above the mountpoint: created $TMP/real/mnt"
mkdir -m 1777 "$TMP/shared"
conf_mnt "$TMP/shared/mnt"
mnt_refused "world-writable parent of the mountpoint" \
	"mountpoint = $TMP/shared/mnt: directory $TMP/shared is writable by group or others" \
	"$TMP/shared/mnt"
# a mountpoint with files in it: refused (the mount would hide them), exit
# status 78 (the config's mountpoint refused, nvmefsd(8)), the files untouched
mkdir -m 755 "$TMP/full"
echo kept > "$TMP/full/data"
conf_mnt "$TMP/full"
mnt_refused "a mountpoint that is not empty" \
	"$TMP/full: mountpoint is not empty \(1 entry: 'data'\)" "$TMP/full"
[ "${DAEMON_RC:-}" = 78 ] || fail "a mountpoint that is not empty: exit ${DAEMON_RC:-none}, want 78"
[ "$(cat "$TMP/full/data")" = kept ] || fail "a mountpoint that is not empty: its file changed"
MNT=$TMP/mnt

# the admin socket in a directory others may write (sticky or not): whoever
# may change it could put a socket of their own there for root's nvmefsctl;
# refused before anything starts (exit 78), no socket made
mkdir -m 1777 "$TMP/sockdir"
conf_mnt "$TMP/mnt"
sed -i "s|^admin_socket = .*|admin_socket = $TMP/sockdir/admin.sock|" "$CONF"
mnt_refused "a shared directory for the admin socket" \
	"admin_socket = $TMP/sockdir/admin.sock: directory $TMP/sockdir is writable by group or others" "$TMP/mnt"
[ "${DAEMON_RC:-}" = 78 ] || fail "shared socket directory: exit ${DAEMON_RC:-none}, want 78"
[ -e "$TMP/sockdir/admin.sock" ] && fail "shared socket directory: a socket was made"
finish
