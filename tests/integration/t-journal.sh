#!/bin/sh
# t-journal.sh - where the daemon's messages go (log.h).  In the foreground
# each line starts with a UTC timestamp (ISO 8601, milliseconds).  When
# JOURNAL_STREAM names its stderr, as systemd sets it, every message is a
# journal record (here received by a stand-in of journald's native socket)
# with MESSAGE, PRIORITY and SYSLOG_IDENTIFIER, CONTROLLER= on a message
# about a controller and NAMESPACE= on one about a namespace (a namespace
# added at run time); nothing then goes to stderr.  With the journal's
# socket gone, the lines go to stderr with their <N> priority prefix.
# transport-independent: where log lines go, not how FUSE requests come
. "$(dirname "$0")/lib.sh"
lib_init
conf_sim nvme0 16M backing=ram -- fast_1 16M backing=ram
daemon_start nvme0n1 fast_1n1 || { fail "start"; finish; }
daemon_stop
grep -Eq '^[0-9]{4}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3}Z nvmefsd: info: ready: 2 namespaces' "$LOG" ||
	fail "foreground: no timestamped ready line: $(grep ready "$LOG")"
t=$(sed -n 's/^\([0-9-]*T[0-9:]*\)\.[0-9]*Z nvmefsd: info: ready:.*/\1/p' "$LOG" | head -n 1)
now=$(date -u +%s)
then=$(date -u -d "$t" +%s 2>/dev/null || echo 0)
[ $((now - then)) -ge 0 ] && [ $((now - then)) -lt 120 ] || fail "foreground: the timestamp $t is not UTC now"

J=/run/systemd/journal/socket
[ -e "$J" ] && { echo "a journald runs here: the journal part needs its socket free"; finish; }
made=
[ -d /run/systemd/journal ] || { mkdir -p /run/systemd/journal && made=1; }
cleanup_journal() { rm -f "$J"; [ -n "$made" ] && rmdir /run/systemd/journal /run/systemd 2>/dev/null; }
trap 'kill $JP 2>/dev/null; cleanup_journal; lib_cleanup' EXIT
# journald's native protocol: one datagram per record, KEY=VALUE lines
python3 - "$J" "$TMP/journal" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "ab", buffering=0)
while True:
    d = s.recv(1 << 20)
    out.write(d.replace(b"\n", b"\t").rstrip(b"\t") + b"\n")
PY
JP=$!
wait_until 30 test -S "$J"
: > "$TMP/err"
# JOURNAL_STREAM names the file that is the daemon's stderr, as systemd
# names the stream it connects
JOURNAL_STREAM=$(stat -c '%d:%i' "$TMP/err") "$D" -f -c "$CONF" 2>> "$TMP/err" &
DPID=$!
wait_until 30 grep -q "MESSAGE=ready: " "$TMP/journal"
ctl detach fast_1 > /dev/null || fail "detach"
ctl inject nvme0 ns-add 2 8M > /dev/null || fail "ns-add"
wait_until 30 grep -q "MESSAGE=nvme0: namespace 2 added" "$TMP/journal"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "journal: exit $DAEMON_RC"
grep -q "MESSAGE=ready: 2 namespaces.*PRIORITY=6.*SYSLOG_IDENTIFIER=nvmefsd" "$TMP/journal" ||
	fail "journal: no ready record with priority 6 and identifier: $(head -c 600 "$TMP/journal")"
grep -q "MESSAGE=fast_1: removed (detached.*PRIORITY=4.*SYSLOG_IDENTIFIER=nvmefsd.*CONTROLLER=fast_1" "$TMP/journal" ||
	fail "journal: the detach's warning has no CONTROLLER=fast_1: $(grep 'fast_1: removed' "$TMP/journal")"
grep -q "MESSAGE=nvme0: .*CONTROLLER=nvme0" "$TMP/journal" || fail "journal: no CONTROLLER=nvme0 record"
grep -q "MESSAGE=ready: .*CONTROLLER=" "$TMP/journal" && fail "journal: CONTROLLER= on a message about no controller"
grep -q "MESSAGE=nvme0: namespace 2 added.*CONTROLLER=nvme0.*NAMESPACE=nvme0n2" "$TMP/journal" ||
	fail "journal: the new namespace's record has no NAMESPACE=nvme0n2: $(grep 'namespace 2' "$TMP/journal")"
grep -q "MESSAGE=ready: .*NAMESPACE=" "$TMP/journal" && fail "journal: NAMESPACE= on a message about no namespace"
[ -s "$TMP/err" ] && fail "journal: lines went to stderr too: $(head -n 3 "$TMP/err")"
n=$(wc -l < "$TMP/journal")

# the journal's socket gone: <N> lines on stderr
kill $JP 2>/dev/null
wait $JP 2>/dev/null
rm -f "$J"
JOURNAL_STREAM=$(stat -c '%d:%i' "$TMP/err") "$D" -f -c "$CONF" 2>> "$TMP/err" &
DPID=$!
wait_until 30 grep -q "ready: " "$TMP/err"
daemon_stop
grep -q '^<6>ready: 2 namespaces' "$TMP/err" || fail "no journal socket: no <6> ready line: $(head -n 3 "$TMP/err")"
echo "journal: $n records with their fields; foreground lines timestamped; <N> lines without a journal"
finish
