#!/bin/sh
# t-admin-users.sh - who may do what, with real users and groups (useradd):
# a member of file_group reads and writes the namespace file and cannot reach
# the admin socket; a member of admin_group runs the read-only commands and
# is refused inject, attach, detach and restart (and the refused hang does not
# happen, nor the restart), and a flood of refusals is logged rate-limited,
# every refusal accounted for; an
# operator (operator_group, also in admin_group to reach the socket) injects.
# Runs on whichever FUSE transport the suite selects.
# transport-independent: the admin socket's and the files' permissions, which the kernel checks before any request
. "$(dirname "$0")/lib.sh"
lib_init
command -v useradd > /dev/null && command -v groupadd > /dev/null ||
	skip "no useradd/groupadd (Debian's passwd package)"
command -v setpriv > /dev/null || skip "no setpriv (util-linux)"

P=nvt$$ # names of this run's users and groups
GF=${P}f GV=${P}v GO=${P}o
UF=${P}-file UV=${P}-view UO=${P}-oper
users_cleanup() {
	for u in "$UF" "$UV" "$UO"; do userdel "$u" 2> /dev/null; done
	for g in "$GF" "$GV" "$GO"; do groupdel "$g" 2> /dev/null; done
	lib_cleanup
}
trap users_cleanup EXIT
for g in "$GF" "$GV" "$GO"; do groupadd "$g" || skip "groupadd $g failed"; done
useradd -M -N -g "$GF" -s /bin/sh "$UF" || skip "useradd failed"
useradd -M -N -g "$GV" -s /bin/sh "$UV" || skip "useradd failed"
useradd -M -N -g "$GV" -G "$GO" -s /bin/sh "$UO" || skip "useradd failed"

as() { # USER CMD...: run as USER with that user's groups
	u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"
}

C=$TMP/nvmefsctl
cp "$BUILD/nvmefsctl" "$C" && chmod 755 "$C"
SOCK=$TMP/admin.sock
FILE_GROUP=$GF FILE_MODE=0660
DAEMON_EXTRA="admin_group = $GV
operator_group = $GO"
conf_sim nvme0 16M
daemon_start nvme0n1 || { fail "daemon did not start"; finish; }
NS=$MNT/nvme0n1

[ "$(stat -c '%a %G' "$SOCK")" = "660 $GV" ] || fail "socket: $(stat -c '%a %G' "$SOCK"), want 660 $GV"

# ---- the file group: the bytes, nothing else ----
head -c 65536 /dev/urandom > "$TMP/data"
chmod 644 "$TMP/data"
as "$UF" dd if="$TMP/data" of="$NS" bs=4096 conv=notrunc 2> "$TMP/err" ||
	fail "file-group member cannot write: $(cat "$TMP/err")"
as "$UF" dd if="$NS" bs=4096 count=16 2> /dev/null | cmp - "$TMP/data" ||
	fail "file-group member reads other bytes than it wrote"
as "$UF" "$C" -s "$SOCK" status > /dev/null 2> "$TMP/err"
rc=$?
[ $rc = 3 ] || fail "file-group member: nvmefsctl status exit $rc, want 3"
grep -q "access denied" "$TMP/err" || fail "file-group member: $(cat "$TMP/err")"
as "$UF" "$C" -s "$SOCK" inject nvme0 hang > /dev/null 2>&1 && fail "file-group member injected a hang"

# ---- admin_group: reads ----
as "$UV" dd if="$NS" of=/dev/null bs=4096 count=1 2> /dev/null &&
	fail "admin_group member (not in file_group) read the namespace"
for cmd in status stats queues namespaces "identify nvme0" config metrics; do
	# shellcheck disable=SC2086
	as "$UV" "$C" -s "$SOCK" $cmd > "$TMP/out" 2>&1 || fail "admin_group: $cmd: $(cat "$TMP/out")"
done
as "$UV" "$C" -s "$SOCK" --json stats > "$TMP/out" 2>&1 || fail "admin_group: stats --json"
as "$UV" "$C" -s "$SOCK" inject nvme0 hang > "$TMP/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "admin_group: inject hang exit $rc, want 1: $(cat "$TMP/out")"
grep -q "permission denied" "$TMP/out" || fail "admin_group: inject: $(cat "$TMP/out")"
as "$UV" "$C" -s "$SOCK" attach nvme0 > "$TMP/out" 2>&1
grep -q "permission denied" "$TMP/out" || fail "admin_group: attach: $(cat "$TMP/out")"
as "$UV" "$C" -s "$SOCK" restart > "$TMP/out" 2>&1 && fail "admin_group member restarted the daemon"
grep -q "permission denied" "$TMP/out" || fail "admin_group: restart: $(cat "$TMP/out")"
as "$UV" "$C" -s "$SOCK" detach nvme0 > "$TMP/out" 2>&1 && fail "admin_group member detached nvme0"
grep -q "permission denied" "$TMP/out" || fail "admin_group: detach: $(cat "$TMP/out")"
grep -q 'refused "restart"' "$LOG" || fail "the refused restart is not in the daemon's log"
grep -q 'refused "inject"' "$LOG" || fail "the refusal is not in the daemon's log"
# the hang was refused: I/O still completes
timeout 10 dd if="$NS" of="$TMP/back" bs=4096 count=16 iflag=direct 2> "$TMP/err" ||
	fail "I/O after a refused hang: $(cat "$TMP/err")"
cmp "$TMP/back" "$TMP/data" || fail "data after a refused hang"

# ---- a flood of refusals (a member of admin_group asking for inject, and
# holding its 8 connections while opening more): the log gets at most
# ADMIN_LOG_BURST (10) lines of each kind per 5 s window, and every refusal
# is either a line or counted in the next line that goes out ----
# limited SECTION-REGEX: lines and lines + the counts they carry, since $1
limited() {
	sed -n "$2,\$p" "$LOG" | grep -E "$1" | awk '{ n++; if (match($0, /and [0-9]+ more such lines/))
		s += substr($0, RSTART + 4, RLENGTH - 20) } END { printf "%d %d\n", n, n + s }'
}
L0=$(($(wc -l < "$LOG") + 1))
N=3000 M=300
T0=$(date +%s)
# (the system's python: the users here cannot reach root's)
PY=/usr/bin/python3
[ -x "$PY" ] || fail "no /usr/bin/python3: the flood is not tried"
as "$UV" "$PY" - "$SOCK" $N $M > "$TMP/flood" 2>&1 <<'PY' || { cat "$TMP/flood"; fail "flood: the client failed"; }
import socket, sys, time
path, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s, s.makefile("rb")
rs, rf = conn()  # one connection for the requests, kept to the end
def refused_requests(k):
    req, denied = b'{"cmd":"inject","controller":"nvme0","fault":"hang"}\n', 0
    for i in range(0, k, 100):
        b = min(100, k - i)
        rs.sendall(req * b)
        for _ in range(b):
            denied += b"permission denied" in rf.readline()
    return denied
def refused_connections(k):
    # this uid's share (ADMIN_MAX_CLIENTS_PER_UID, with the requests'
    # connection), and the first refused
    held, refused = [], 0
    while not refused:
        s, f = conn()
        try:
            s.sendall(b'{"cmd":"status"}\n')
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the request went: the reason is there to read
        line = f.readline()
        if b"too many admin clients of this user" in line:
            refused = 1
            s.close()
        else:
            assert b'"ok":true' in line and len(held) < 8, line
            held.append(s)
    for _ in range(k - 1):
        s, f = conn()
        refused += b"too many admin clients of this user" in f.readline()
        s.close()
    return held, refused
a = refused_requests(n)
held, b = refused_connections(m)
time.sleep(6)  # past the window: the next line tells what was left out
a += refused_requests(1)
s, f = conn()
b += b"too many admin clients of this user" in f.readline()
print(a, b)
PY
T1=$(date +%s)
[ "$(cat "$TMP/flood")" = "$((N + 1)) $((M + 1))" ] || fail "flood: refusals answered: $(cat "$TMP/flood")"
for k in 'admin: uid [0-9]+ \(pid [0-9]+\) refused "inject"':$((N + 1)) \
	'admin socket: uid [0-9]+ \(pid [0-9]+\) refused: .*too many admin clients of this user':$((M + 1)); do
	re=${k%:*} want=${k##*:}
	set -- $(limited "$re" "$L0")
	# windows: one per 5 s of the flood's span, and the one it started in
	max=$((10 * ((T1 - T0) / 5 + 2)))
	echo "flood: $want refusals: $1 lines (at most $max), accounting for $2"
	[ "$2" = "$want" ] || fail "flood: $want refusals, lines and their counts add up to $2: $re"
	[ "$1" -le "$max" ] || fail "flood: $1 lines for $want refusals in $((T1 - T0)) s (at most $max)"
done

# ---- operator_group: changes ----
as "$UO" "$C" -s "$SOCK" inject nvme0 delay 1 > "$TMP/out" 2>&1 || fail "operator: inject delay: $(cat "$TMP/out")"
as "$UO" "$C" -s "$SOCK" inject nvme0 clear > "$TMP/out" 2>&1 || fail "operator: inject clear: $(cat "$TMP/out")"
as "$UO" "$C" -s "$SOCK" status > /dev/null 2>&1 || fail "operator: status"
# root may always
"$C" -s "$SOCK" inject nvme0 clear > "$TMP/out" 2>&1 || fail "root: inject clear: $(cat "$TMP/out")"

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exit $DAEMON_RC"
finish
