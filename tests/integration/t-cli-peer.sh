#!/bin/sh
# t-cli-peer.sh - nvmefsctl talks only to a daemon it can trust.  A user who
# binds the admin socket's path first (here: in a sticky world-writable
# directory, as /tmp) and answers root's `nvmefsctl restart` with a made-up
# success is refused (the listener is not root: SO_PEERCRED), exit 3, with
# nothing sent; so is a socket in a directory another user owns, or one
# writable by others without the sticky bit, even when root listens there.
# The same fake server run by root in root's directory is believed (the
# check refuses the listener, not the protocol).  No daemon is needed.
# transport-independent: nvmefsctl against fake servers; no daemon runs
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (runs a server as another user)"
command -v setpriv > /dev/null || skip "no setpriv (util-linux)"
CTL=$BUILD/nvmefsctl
[ -x "$CTL" ] || { echo "FAIL: no $CTL (make)"; exit 1; }
# the system's python: one under root's home (pyenv) is not another user's
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no /usr/bin/python3"
TMP=$(mktemp -d /tmp/nvmefs-test.XXXXXX)
chmod 755 "$TMP"
LOG=$TMP/none
: > "$LOG"
SPID=
cleanup_peer() {
	[ -n "$SPID" ] && kill "$SPID" 2> /dev/null
	rm -rf "$TMP"
}
trap cleanup_peer EXIT

# fake_server USER PATH: answers every request line with a restart's
# success and records what it was sent, in $TMP/heard
cat > "$TMP/fake.py" <<'PY'
import os, socket, sys
path, heard = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o666)
s.listen(4)
open(path + ".ready", "w").close()
while True:
    c, _ = s.accept()
    data = b""
    while b"\n" not in data:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    with open(heard, "ab") as f:
        f.write(data)
    c.sendall(b'{"ok": true, "restart": "pid 1 re-executes /usr/sbin/nvmefsd"}\n')
    c.close()
PY
chmod 644 "$TMP/fake.py"
fake_server() {
	[ -n "$SPID" ] && { kill "$SPID"; wait "$SPID" 2> /dev/null; }
	rm -f "$2" "$2.ready"
	: > "$TMP/heard"
	chmod 666 "$TMP/heard"
	if [ "$1" = root ]; then
		"$PY" "$TMP/fake.py" "$2" "$TMP/heard" &
	else
		setpriv --reuid="$1" --regid="$1" --clear-groups "$PY" "$TMP/fake.py" "$2" "$TMP/heard" &
	fi
	SPID=$!
	i=0
	while [ ! -e "$2.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -e "$2.ready" ] || fail "the fake server did not start"
}
# refused WHAT SOCKET REGEX: restart must exit 3 with the message, and the
# server must have heard nothing
refused() {
	"$CTL" -s "$2" restart > "$TMP/out" 2> "$TMP/err"
	rc=$?
	[ $rc = 3 ] || fail "$1: exit $rc, want 3 (out: $(cat "$TMP/out"))"
	grep -Eq "$3" "$TMP/err" || fail "$1: no message matching '$3': $(cat "$TMP/err")"
	[ -s "$TMP/out" ] && fail "$1: printed the fake answer: $(cat "$TMP/out")"
	[ -s "$TMP/heard" ] && fail "$1: the request reached the server: $(cat "$TMP/heard")"
	echo "ok: $1: $(cat "$TMP/err")"
}

# a user took the name in a sticky world-writable directory of root's
mkdir -m 1777 "$TMP/shared"
fake_server 65534 "$TMP/shared/nvmefsd.sock"
refused "a socket bound by another user" "$TMP/shared/nvmefsd.sock" \
	"the process listening there \\(pid [0-9]+\\) runs as uid 65534, not root"

# root listens, but in a directory others could change
mkdir -m 755 "$TMP/theirs"
chown 65534 "$TMP/theirs"
fake_server root "$TMP/theirs/nvmefsd.sock"
refused "a socket in another user's directory" "$TMP/theirs/nvmefsd.sock" \
	"its directory $TMP/theirs belongs to uid 65534, not root"
mkdir -m 777 "$TMP/open"
fake_server root "$TMP/open/nvmefsd.sock"
refused "a socket in a world-writable directory without the sticky bit" \
	"$TMP/open/nvmefsd.sock" "its directory $TMP/open is writable by group or others \\(mode 0777\\)"

# root's server in root's directory is believed
mkdir -m 755 "$TMP/root"
fake_server root "$TMP/root/nvmefsd.sock"
out=$("$CTL" -s "$TMP/root/nvmefsd.sock" restart 2> "$TMP/err")
rc=$?
[ $rc = 0 ] || fail "root's server: exit $rc: $(cat "$TMP/err")"
[ "$out" = "pid 1 re-executes /usr/sbin/nvmefsd" ] || fail "root's server: printed '$out'"
grep -q '"restart"' "$TMP/heard" || fail "root's server: heard no restart request"
# and so is one in a sticky directory of root's
fake_server root "$TMP/shared/nvmefsd.sock"
"$CTL" -s "$TMP/shared/nvmefsd.sock" restart > /dev/null 2> "$TMP/err" ||
	fail "root's server in a sticky directory: $(cat "$TMP/err")"
echo "ok: root's server answers"
finish
