#!/bin/sh
# t-health.sh - the log page commands against a running nvmefsd over the
# software controller: smart-log (temperature, data units and host commands
# that grow by the I/O a dd did, media errors and error log entries from an
# injected media error), error-log (the failed read's entry), fw-log (slot 1
# holds the daemon's version) and list, in human and --json form.
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
VERSION=$(sed -n 's/^VERSION := *//p' "$ROOT/Makefile")

TMP=$(mktemp -d /tmp/t-health.XXXXXX)
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


# ---- every command, human and JSON ----
for cmd in "smart-log nvme0" "error-log nvme0" "fw-log nvme0" list; do
	# shellcheck disable=SC2086
	ctl $cmd > "$TMP/human" 2> "$TMP/err" || fail "$cmd: exit $?: $(cat "$TMP/err")"
	[ -s "$TMP/human" ] || fail "$cmd: printed nothing"
	[ -s "$TMP/err" ] && fail "$cmd: wrote to stderr: $(cat "$TMP/err")"
	# shellcheck disable=SC2086
	ctl $cmd --json > "$TMP/json" 2> "$TMP/err" || fail "$cmd --json: exit $?: $(cat "$TMP/err")"
	python3 -m json.tool "$TMP/json" > /dev/null 2>&1 || fail "$cmd --json: not JSON: $(head -c 300 "$TMP/json")"
	[ "$(json "$TMP/json" 'd["ok"]')" = True ] || fail "$cmd --json: ok is not true"
	name=$(echo "$cmd" | tr ' ' '_')
	cp "$TMP/human" "$TMP/h_$name"
	cp "$TMP/json" "$TMP/j_$name"
done

S=$TMP/j_smart-log_nvme0
grep -Eq '^temperature +: 37 °C \(310 K\)$' "$TMP/h_smart-log_nvme0" || fail "smart-log: temperature: $(cat "$TMP/h_smart-log_nvme0")"
grep -Eq '^available_spare +: 100%$' "$TMP/h_smart-log_nvme0" || fail "smart-log: available_spare"
grep -Eq '^available_spare_threshold +: 10%$' "$TMP/h_smart-log_nvme0" || fail "smart-log: threshold"
grep -Eq '^Data Units Read +: [0-9]+ \(' "$TMP/h_smart-log_nvme0" || fail "smart-log: Data Units Read"
[ "$(json "$S" 'd["temperature"], d["temperature_c"], d["avail_spare"], d["spare_thresh"], d["percent_used"], d["power_cycles"], d["media_errors"]')" = "(310, 37, 100, 10, 0, 1, 0)" ] ||
	fail "smart-log --json: $(cat "$S")"
for f in data_units_read data_units_written data_units_read_bytes data_units_written_bytes \
	host_read_commands host_write_commands controller_busy_time power_on_hours unsafe_shutdowns \
	num_err_log_entries warning_temp_time critical_comp_time critical_warning; do
	[ "$(json "$S" "type(d['$f']).__name__")" = int ] || fail "smart-log --json: no integer $f"
done
r0=$(json "$S" 'd["data_units_read"]')
w0=$(json "$S" 'd["data_units_written"]')
hr0=$(json "$S" 'd["host_read_commands"]')
hw0=$(json "$S" 'd["host_write_commands"]')
e0=$(json "$S" 'd["num_err_log_entries"]')

# 4 MiB written and read back: 8192 units of 512 bytes each way, 8.192
# data units (thousands of 512-byte units, rounded up)
dd if=/dev/urandom of="$TMP/data" bs=1M count=4 2> /dev/null
dd if="$TMP/data" of="$NS" bs=64k count=64 oflag=direct conv=notrunc 2> "$TMP/dd" || fail "dd write: $(cat "$TMP/dd")"
dd if="$NS" of=/dev/null bs=64k count=64 iflag=direct 2> "$TMP/dd" || fail "dd read: $(cat "$TMP/dd")"
ctl --json smart-log nvme0 > "$TMP/s1" || fail "smart-log after dd"
r1=$(json "$TMP/s1" 'd["data_units_read"]')
w1=$(json "$TMP/s1" 'd["data_units_written"]')
[ "$r1" -ge $((r0 + 8)) ] || fail "data_units_read $r0 -> $r1 after reading 4 MiB"
[ "$w1" -ge $((w0 + 8)) ] || fail "data_units_written $w0 -> $w1 after writing 4 MiB"
[ "$(json "$TMP/s1" 'd["host_write_commands"]')" -ge $((hw0 + 64)) ] || fail "host_write_commands did not grow by 64"
[ "$(json "$TMP/s1" 'd["host_read_commands"]')" -ge $((hr0 + 64)) ] || fail "host_read_commands did not grow by 64"
[ "$(json "$TMP/s1" 'd["data_units_written_bytes"] == d["data_units_written"] * 512000')" = True ] ||
	fail "data_units_written_bytes"

# an injected media error (Unrecovered Read Error, 0x281): counted in the
# SMART log and entered in the error log
ctl inject nvme0 fail 1 0x281 > "$TMP/out" 2>&1 || fail "inject fail: $(cat "$TMP/out")"
dd if="$NS" of=/dev/null bs=4k count=1 iflag=direct 2> /dev/null && fail "read after inject fail succeeded"
ctl --json smart-log nvme0 > "$TMP/s2" || fail "smart-log after the failure"
[ "$(json "$TMP/s2" 'd["media_errors"]')" -ge 1 ] || fail "media_errors: $(json "$TMP/s2" 'd["media_errors"]')"
[ "$(json "$TMP/s2" 'd["num_err_log_entries"]')" -gt "$e0" ] || fail "num_err_log_entries did not grow"
ctl --json error-log nvme0 > "$TMP/e" || fail "error-log after the failure"
[ "$(json "$TMP/e" 'any(e["status_field"] & 0x7ff == 0x281 and e["sqid"] == 1 for e in d["errors"])')" = True ] ||
	fail "error-log: no entry for the failed read: $(cat "$TMP/e")"
ctl error-log nvme0 > "$TMP/eh" || fail "error-log (text)"
grep -Eq '^status_field +: 0x281, ' "$TMP/eh" || fail "error-log text: $(cat "$TMP/eh")"

# firmware slot 1 is the daemon's version, and list shows the controller
[ "$(json "$TMP/j_fw-log_nvme0" 'd["active_slot"], d["slots"][0]["slot"], d["slots"][0]["revision"]')" = "(1, 1, '$VERSION')" ] ||
	fail "fw-log --json: $(cat "$TMP/j_fw-log_nvme0")"
grep -q "^frs1 : $VERSION$" "$TMP/h_fw-log_nvme0" || fail "fw-log: $(cat "$TMP/h_fw-log_nvme0")"
grep -Eq "^nvme0 +SIM-nvme0 +nvmefs software controller +1 +64.0 MiB +4096 B \+ 0 B +$VERSION +live +sim$" "$TMP/h_list" ||
	fail "list: $(cat "$TMP/h_list")"
[ "$(json "$TMP/j_list" '[(c["name"], c["namespaces"], c["size"], c["transport"], c["state"]) for c in d["controllers"]]')" = "[('nvme0', 1, 67108864, 'sim', 'live')]" ] ||
	fail "list --json: $(cat "$TMP/j_list")"

# usage errors
"$C" -s "$SOCK" smart-log > "$TMP/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "smart-log needs a CONTROLLER" "$TMP/out" || fail "smart-log without a controller: exit $rc: $(cat "$TMP/out")"
"$C" -s "$SOCK" fw-log nope > "$TMP/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q 'no controller named "nope"' "$TMP/out" || fail "fw-log nope: exit $rc: $(cat "$TMP/out")"

[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "nvmefsctl smart-log, error-log, fw-log and list checked"
