#!/bin/sh
# t-restart-check.sh - what nvmefsctl restart (and so systemctl reload, the
# unit's ExecReload) tells its caller when it is refused, and that checking
# the installed binary never holds the daemon up.  Under the fd-store
# stand-in, the daemon started as an installed copy of nvmefsd:
#   - the config no longer loads (three errors): exit 1, each error shown;
#   - the installed binary refuses with more than a pipe holds (a version
#     that rejects 3000 keys): exit 1, its verdict, its first 5 lines and
#     "(and 2995 more lines)", ended by its exit, not by the bound;
#   - an installed binary that hangs: status is answered meanwhile, a second
#     restart is refused, the check is killed at its bound (8 s) and the
#     restart refused, saying so;
#   - SIGTERM while a check runs: the daemon stops at once (exit 0) and the
#     restart's caller is told;
#   - the binary run is the path the kernel ran the daemon from: started
#     as "nvmefsd" with a planted one first on its PATH, the restart
#     re-executes the real one and the planted one never runs; with the
#     binary's directory writable by others the restart is refused.
# After each refusal the daemon serves on, the same process.
. "$(dirname "$0")/lib.sh"
lib_init
. "$(dirname "$0")/fdstore-lib.sh"
FUSE_TRANSPORT=classic # a restart in place is /dev/fuse's (t-upgrade.sh)
conf_write <<EOC
[controller nvme0]
device = sim
size = 16M
block_size = 4096
backing = $TMP/%c-%n.img
EOC
cp "$CONF" "$TMP/base.conf"
CTL="$BUILD/nvmefsctl -s $TMP/admin.sock"
mkdir -p "$TMP/sbin"
BIN=$TMP/sbin/nvmefsd
STORE_BIN=$BIN
cp "$D" "$BIN"
store_start -n 1 || finish
PID0=$DPID

serves() { # WHAT: the same daemon still serves the file
	[ "$(cat "$TMP/pid")" = "$PID0" ] && kill -0 "$PID0" || fail "$1: the daemon changed or went"
	dd if=/dev/urandom of="$TMP/a" bs=4096 count=4 status=none
	dd if="$TMP/a" of="$MNT/nvme0n1" bs=4096 oflag=direct conv=notrunc status=none &&
		cmp -n 16384 "$TMP/a" "$MNT/nvme0n1" || fail "$1: I/O after the refusal"
}
# the check's child: a process of the daemon's other than its threads
check_child() { pgrep -P "$DPID" > /dev/null; }

# ---- the config does not load: its errors go to the caller ----
sed -e 's/^\[engine\]$/[engine]\nno_such_key = 1\nqueues = x/' \
	-e 's/^\[daemon\]$/[daemon]\nanother_bad_key = 2/' "$TMP/base.conf" > "$CONF"
$CTL restart > "$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
[ $rc = 1 ] || fail "bad config: nvmefsctl restart exit $rc, want 1"
grep -q "the config $CONF does not load:$" "$TMP/out" || fail "bad config: no verdict"
for k in another_bad_key no_such_key "queues = x"; do
	grep -q "^  .*$k" "$TMP/out" || fail "bad config: '$k' is not among the reasons shown"
done
cp "$TMP/base.conf" "$CONF"
serves "bad config"

# ---- the installed binary refuses, at length ----
{
	echo '#!/bin/sh'
	echo 'case " $* " in *" --check-adopt "*) ;; *) exit 1 ;; esac'
	echo "seq 3000 | sed 's|.*|/etc/nvmefs/nvmefs.conf:&: key& = 1: unknown key in [daemon]|' >&2"
	echo 'echo "the config /etc/nvmefs/nvmefs.conf does not load"'
	echo 'exit 1'
} > "$BIN.new"
chmod 755 "$BIN.new"
mv -f "$BIN.new" "$BIN"
$CTL restart > "$TMP/out" 2>&1
rc=$?
head -n 8 "$TMP/out"
[ $rc = 1 ] || fail "verbose refusal: exit $rc, want 1"
grep -q "$BIN would not adopt the connection: the config /etc/nvmefs/nvmefs.conf does not load$" "$TMP/out" ||
	fail "verbose refusal: no verdict"
grep -q '^  /etc/nvmefs/nvmefs.conf:1: key1 = 1' "$TMP/out" &&
	grep -q '^  /etc/nvmefs/nvmefs.conf:5: key5 = 1' "$TMP/out" ||
	fail "verbose refusal: its first lines are not shown"
grep -q '^  (and 2995 more lines)$' "$TMP/out" || fail "verbose refusal: how many more is not said"
# ended by the child's exit, not by the bound
grep -q "did not end within" "$TMP/out" && fail "verbose refusal: ended at the bound, not drained"
grep -q "restart refused: $BIN would not adopt" "$LOG" || fail "verbose refusal: not logged"
serves "verbose refusal"

# ---- a binary that hangs: the daemon answers meanwhile, the check is killed ----
{
	echo '#!/bin/sh'
	echo 'echo checking'
	echo 'exec sleep 1000'
} > "$BIN.new"
chmod 755 "$BIN.new"
mv -f "$BIN.new" "$BIN"
$CTL restart > "$TMP/out" 2>&1 &
RP=$!
i=0
while ! check_child && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check_child || fail "hang: no check running"
$CTL status > "$TMP/st" 2>&1 || fail "hang: status while the check runs: $(cat "$TMP/st")"
$CTL restart > "$TMP/out2" 2>&1 && fail "hang: a second restart during the check succeeded"
grep -q "being checked already" "$TMP/out2" || fail "hang: second restart: $(cat "$TMP/out2")"
wait $RP
rc=$?
cat "$TMP/out"
[ $rc = 1 ] || fail "hang: restart exit $rc, want 1"
grep -q "$BIN --check-adopt did not end within 8 s: killed; its last line: checking" "$TMP/out" ||
	fail "hang: the reason is not the bound"
check_child && fail "hang: the check's child is still there: $(pgrep -a -P "$DPID")"
serves "hang"

# ---- SIGTERM during a check: the stop wins, the caller is told ----
$CTL restart > "$TMP/out" 2>&1 &
RP=$!
i=0
while ! check_child && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check_child || fail "stop: no check running"
KID=$(pgrep -P "$DPID")
t0=$(date +%s)
store_stop
t1=$(date +%s)
wait $RP
rc=$?
cat "$TMP/out"
[ "$SRC" = 0 ] || fail "stop during a check: exit $SRC"
[ $((t1 - t0)) -lt 8 ] || fail "stop during a check took $((t1 - t0)) s: it waited for the check"
[ $rc = 1 ] && grep -q "the daemon is stopping" "$TMP/out" ||
	fail "stop during a check: the caller got: $(cat "$TMP/out")"
[ -n "$KID" ] && kill -0 "$KID" 2> /dev/null && { fail "the check's child outlived the daemon"; kill -9 "$KID"; }
fuse_mounted && fail "still mounted after the stop"

# ---- the binary re-executed is the one the kernel ran: not the first
# "nvmefsd" on the daemon's PATH (started with argv[0] "nvmefsd", PATH
# leading with a directory anyone may write, where one was planted), and
# not one in a directory others may write ----
cp "$D" "$BIN"
mkdir -m 777 "$TMP/planted"
{
	echo '#!/bin/sh'
	echo ": > $TMP/planted-ran"
	echo 'echo ok'
} > "$TMP/planted/nvmefsd"
chmod 755 "$TMP/planted/nvmefsd"
{
	echo '#!/usr/bin/python3'
	echo 'import os, sys'
	echo "os.environ['PATH'] = '$TMP/planted:' + os.environ.get('PATH', '/usr/bin:/bin')"
	echo "os.execv('$BIN', ['nvmefsd'] + sys.argv[1:])"
} > "$TMP/run-as-nvmefsd"
chmod 755 "$TMP/run-as-nvmefsd"
STORE_BIN=$TMP/run-as-nvmefsd
store_start -n 1 || finish
PID0=$DPID
chmod 777 "$TMP/sbin"
$CTL restart > "$TMP/out" 2>&1 && fail "restart with the binary's directory writable by others succeeded"
grep -q "the installed binary $BIN: directory $TMP/sbin is writable by group or others" "$TMP/out" ||
	fail "writable directory: $(cat "$TMP/out")"
chmod 755 "$TMP/sbin"
n=$(grep -c "nvmefsd: info: ready:" "$LOG")
$CTL restart > "$TMP/out" 2>&1 || fail "restart: $(cat "$TMP/out")"
grep -q "pid $PID0 re-executes $BIN$" "$TMP/out" || fail "restart: $(cat "$TMP/out")"
wait_for "nvmefsd: info: ready:" $((n + 1)) 15 || fail "not ready again after the restart"
[ -e "$TMP/planted-ran" ] && fail "the planted nvmefsd on PATH ran as root"
[ "$(readlink "/proc/$PID0/exe")" = "$BIN" ] || fail "the daemon runs $(readlink "/proc/$PID0/exe")"
serves "restart by the kernel's path"
store_stop
[ "$SRC" = 0 ] || fail "last stop: exit $SRC"
finish
