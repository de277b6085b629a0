#!/bin/sh
# t-aen.sh - asynchronous events and namespace changes through a running
# nvmefsd over the software controller: nvmefsctl inject warn raises a SMART
# event the engine reads (its log says so, smart-log shows the warning and
# the values it is about, clear takes it back); inject ns-add, ns-resize
# (grow, then a refused shrink) and ns-remove raise Namespace Attribute
# Changed events the engine follows (its log names each change); the usage
# errors of the new injections; the mount keeps serving I/O throughout.
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
D=$BUILD/nvmefsd
# NVMEFS_STRACE_DIR: traced as in lib.sh
[ -z "${NVMEFS_STRACE_DIR:-}" ] || D=$(. "$ROOT/tests/integration/lib.sh" && echo "$D")
C=$BUILD/nvmefsctl
[ -x "$D" ] && [ -x "$C" ] || { echo "no $D or $C: build them first"; exit 1; }
command -v python3 > /dev/null || { echo "skip: python3 is needed to check the JSON"; exit 77; }
[ -c /dev/fuse ] || { echo "skip: no /dev/fuse"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: needs root (FUSE mount, setpriv)"; exit 77; }

TMP=$(mktemp -d /tmp/t-aen.XXXXXX)
# searchable by everyone, so that only the socket's own mode keeps others out
chmod 755 "$TMP"
MNT=$TMP/mnt
SOCK=$TMP/admin.sock
CONF=$TMP/nvmefs.conf
LOG=$TMP/nvmefsd.log
NS=$MNT/nvme0n1
PID=
fails=0

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

cleanup() {
	if [ -n "$PID" ] && kill -0 "$PID" 2> /dev/null; then
		kill -TERM "$PID"
		i=0
		while kill -0 "$PID" 2> /dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -0 "$PID" 2> /dev/null && { echo "nvmefsd ignored SIGTERM for 10 s"; kill -KILL "$PID"; }
	fi
	mountpoint -q "$MNT" 2> /dev/null && fusermount3 -u "$MNT" 2> /dev/null
	[ -n "${KEEP:-}" ] && { echo "kept $TMP"; return; }
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir "$MNT"
cat > "$CONF" << EOF
[daemon]
mountpoint = $MNT
admin_socket = $SOCK
# the admin group: uid/gid 65534 is not in it
file_group = root
fuse_transport = ${FUSE_TRANSPORT:-auto}
[engine]
queues = 1
queue_depth = 64
cq_budget = 16
[controller nvme0]
device = sim
size = 64M
block_size = 4096
EOF

"$D" -f -c "$CONF" > "$LOG" 2>&1 &
PID=$!
i=0
while [ ! -S "$SOCK" ] || [ ! -e "$NS" ]; do
	if ! kill -0 "$PID" 2> /dev/null; then
		wait "$PID"
		echo "nvmefsd exited ($?) before its admin socket and mount appeared:"
		cat "$LOG"
		PID=
		exit 1
	fi
	i=$((i + 1))
	if [ $i -gt 100 ]; then
		cat "$LOG"
		[ -S "$SOCK" ] || { echo "skip: no admin socket within 10 s: this nvmefsd lacks admin support (or is stuck in start-up: its log is above)"; exit 77; }
		echo "FAIL: $NS did not appear within 10 s"
		exit 1
	fi
	sleep 0.1
done

ctl() { "$C" -s "$SOCK" "$@"; }

# json FILE EXPR: evaluate a Python expression over the parsed JSON d
json() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# expect_log PATTERN WHAT: the daemon logs PATTERN within 5 s
expect_log() {
	i=0
	while ! grep -Eq "$1" "$LOG"; do
		i=$((i + 1))
		[ $i -gt 50 ] && { fail "$2: no '$1' in the daemon's log"; return 1; }
		sleep 0.1
	done
	return 0
}

io_ok() {
	dd if="$NS" of=/dev/null bs=4096 count=16 iflag=direct 2> "$TMP/dd" ||
		fail "$1: reading $NS failed: $(cat "$TMP/dd")"
}

# ---- a SMART critical warning ----
out=$(ctl inject nvme0 warn spare 2>&1) || fail "inject warn spare: $out"
[ "$out" = "nvme0: warn spare injected; controller live" ] || fail "inject warn spare printed: $out"
expect_log 'nvme0: SMART/health event \(info 0x02\): critical warning 0x01' "warn spare"
ctl smart-log nvme0 --json > "$TMP/s.json" || fail "smart-log after warn"
[ "$(json "$TMP/s.json" 'd["critical_warning"], d["avail_spare"], d["spare_thresh"]')" = "(1, 5, 10)" ] ||
	fail "smart-log after warn spare: $(cat "$TMP/s.json")"
ctl inject nvme0 warn temperature > /dev/null || fail "inject warn temperature"
expect_log 'nvme0: SMART/health event \(info 0x01\): critical warning 0x03' "warn temperature"
ctl smart-log nvme0 --json > "$TMP/s.json" || fail "smart-log after warn temperature"
[ "$(json "$TMP/s.json" 'd["critical_warning"], d["temperature"]')" = "(3, 348)" ] ||
	fail "smart-log after warn temperature: $(cat "$TMP/s.json")"
ctl inject nvme0 warn clear > /dev/null || fail "inject warn clear"
ctl smart-log nvme0 --json > "$TMP/s.json" || fail "smart-log after clear"
[ "$(json "$TMP/s.json" 'd["critical_warning"], d["avail_spare"]')" = "(0, 100)" ] ||
	fail "smart-log after warn clear: $(cat "$TMP/s.json")"
io_ok "after the warnings"

# ---- namespaces: added, grown, shrunk (refused), removed ----
out=$(ctl inject nvme0 ns-add 2 4M 2>&1) || fail "inject ns-add: $out"
[ "$out" = "nvme0: ns-add namespace 2, 4194304 bytes injected; controller live" ] ||
	fail "inject ns-add printed: $out"
expect_log 'nvme0: namespace 2 attached \(1024 blocks of 4096 bytes\)' "ns-add"
ctl inject nvme0 ns-resize 1 128M > /dev/null || fail "inject ns-resize 1 128M"
expect_log 'nvme0: namespace 1 grew from 16384 to 32768 blocks' "ns-resize grow"
ctl inject nvme0 ns-resize 2 2M > /dev/null || fail "inject ns-resize 2 2M"
expect_log 'nvme0: namespace 2 shrank from 1024 to 512 blocks: refused' "ns-resize shrink"
ctl inject nvme0 ns-remove 2 > /dev/null || fail "inject ns-remove 2"
expect_log 'nvme0: namespace 2 was detached' "ns-remove"
io_ok "after the namespace changes"
ctl stats --json > /dev/null || fail "stats after the namespace changes"

# ---- refused ----
# refused CMD... MESSAGE: exits non-zero and says MESSAGE on stderr
refused() {
	msg=$1
	shift
	if ctl "$@" > /dev/null 2> "$TMP/err"; then
		fail "$*: accepted"
	elif ! grep -qF "$msg" "$TMP/err"; then
		fail "$*: said $(cat "$TMP/err"), not $msg"
	fi
}
refused "inject warn takes spare|temperature" inject nvme0 warn
refused "inject warn needs \"warning\"" inject nvme0 warn hot
refused "NSID 0: a namespace ID, 1 to 16" inject nvme0 ns-add 0 4M
refused "SIZE 4X: bytes" inject nvme0 ns-add 3 4X
refused "namespace 1 of nvme0: exists already" inject nvme0 ns-add 1 4M
refused "namespace 2 of nvme0: no such namespace" inject nvme0 ns-remove 2
refused "inject ns-remove takes NSID" inject nvme0 ns-remove
ctl --help | grep -q "ns-add NSID SIZE" || fail "--help does not show ns-add"

kill -0 "$PID" 2> /dev/null || fail "nvmefsd died"
[ $fails = 0 ] || { echo "--- nvmefsd log:"; cat "$LOG"; exit 1; }
echo "t-aen: ok"
