#!/bin/sh
# t-health.sh - the log page commands against a running nvmefsd over the
# software controller: smart-log (temperature, data units and host commands
# that grow by the I/O a dd did, media errors and error log entries from an
# injected media error), error-log (the failed read's entry), fw-log (slot 1
# holds the daemon's version), effects-log (the sim's Commands Supported and
# Effects) and list, in human and --json form; the health cache in status
# and metrics (promtool checks the text); and a device that
# does not answer: smart-log waits for it while status from another client
# is answered at once.
# transport-independent: log pages and the health cache, over the admin socket
. "$(dirname "$0")/lib.sh"
lib_init_ctl
SOCK=$TMP/admin.sock
NS=$MNT/nvme0n1
mkdir "$MNT"

# a device thread: what a hang held back runs at unhang, no doorbell needed
conf_sim nvme0 64M block_size=4096 exec=thread
daemon_start nvme0n1 || { fail "start"; finish; }


# ---- every command, human and JSON ----
ctl_forms "smart-log nvme0" "error-log nvme0" "fw-log nvme0" "effects-log nvme0" list

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

"$C" -s "$SOCK" effects-log > "$TMP/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "effects-log needs a CONTROLLER" "$TMP/out" || fail "effects-log without a controller: exit $rc: $(cat "$TMP/out")"

# ---- effects-log: what the sim executes, as nvme-cli prints it ----
H=$TMP/h_effects-log_nvme0
grep -Eq '^ACS2 +\[Get Log Page +\] 00000001  CSUPP\+ LBCC- NCC- NIC- CCC- CSE=0$' "$H" || fail "effects-log: Get Log Page: $(cat "$H")"
grep -Eq '^IOCS1 +\[Write +\] 00000003  CSUPP\+ LBCC\+ ' "$H" || fail "effects-log: Write: $(cat "$H")"
grep -Eq '^IOCS2 +\[Read +\] 00000001  CSUPP\+ LBCC- ' "$H" || fail "effects-log: Read: $(cat "$H")"
grep -q 'Format NVM' "$H" && fail "effects-log: the sim has no Format NVM"
[ "$(json "$TMP/j_effects-log_nvme0" 'sorted(e["opcode"] for e in d["admin"]), sorted((e["opcode"], e["lbcc"]) for e in d["io"])')" = \
	"([0, 1, 2, 4, 5, 6, 8, 9, 10, 12], [(0, False), (1, True), (2, False), (8, True), (9, True)])" ] ||
	fail "effects-log --json: $(cat "$TMP/j_effects-log_nvme0")"

# ---- the health cache: read at start (health_interval 60 by default) ----
i=0
while [ $i -lt 50 ]; do
	ctl --json status > "$TMP/st" || fail "status"
	[ "$(json "$TMP/st" 'd["controllers"][0]["health"]["valid"]')" = True ] && break
	sleep 0.1
	i=$((i + 1))
done
[ "$(json "$TMP/st" '(lambda h: (h["valid"], h["temperature_c"], h["available_spare"], h["available_spare_threshold"], h["percentage_used"], h["critical_warnings"], h["error"]))(d["controllers"][0]["health"])')" = \
	"(True, 37, 100, 10, 0, [], None)" ] || fail "status health: $(json "$TMP/st" 'd["controllers"][0]["health"]')"
json "$TMP/st" 'd["controllers"][0]["health"]["read_at"]' | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$' ||
	fail "status health: read_at"
ctl status > "$TMP/sth" || fail "status (text)"
grep -Eq '^nvme0 +37 C +100% +0% +[0-9-]+T[0-9:]+Z +none +-$' "$TMP/sth" || fail "status text health: $(cat "$TMP/sth")"

ctl metrics > "$TMP/prom" || fail "metrics"
for m in 'nvmefs_controller_temperature_celsius{controller="nvme0"} 36.85' \
	'nvmefs_controller_available_spare_ratio{controller="nvme0"} 1' \
	'nvmefs_controller_available_spare_threshold_ratio{controller="nvme0"} 0.1' \
	'nvmefs_controller_percentage_used_ratio{controller="nvme0"} 0' \
	'nvmefs_controller_critical_warning{controller="nvme0",warning="spare"} 0' \
	'nvmefs_controller_critical_warning{controller="nvme0",warning="temperature"} 0' \
	'nvmefs_controller_critical_warning{controller="nvme0",warning="reliability"} 0' \
	'nvmefs_controller_critical_warning{controller="nvme0",warning="readonly"} 0' \
	'nvmefs_controller_critical_warning{controller="nvme0",warning="backup"} 0' \
	"nvmefs_controller_info{controller=\"nvme0\",model=\"nvmefs software controller\",serial=\"SIM-nvme0\",firmware=\"$VERSION\",transport=\"sim\"} 1"; do
	grep -qxF "$m" "$TMP/prom" || fail "metrics: no line $m"
done
for m in media_errors_total data_read_bytes_total data_written_bytes_total power_on_seconds_total unsafe_shutdowns_total; do
	grep -Eq "^nvmefs_controller_$m\{controller=\"nvme0\"\} [0-9]+$" "$TMP/prom" || fail "metrics: nvmefs_controller_$m"
	grep -q "^# TYPE nvmefs_controller_$m counter$" "$TMP/prom" || fail "metrics: nvmefs_controller_$m is no counter"
done
# scripts/deps.sh test installs promtool
if command -v promtool > /dev/null; then
	promtool check metrics < "$TMP/prom" > "$TMP/lint" 2>&1 || fail "promtool check metrics: $(cat "$TMP/lint")"
else
	fail "promtool is not installed (scripts/deps.sh test installs it): the metrics are not linted"
fi

# ---- a device that does not answer holds smart-log, not the daemon ----
ctl inject nvme0 hang > "$TMP/out" 2>&1 || fail "inject hang: $(cat "$TMP/out")"
ctl --json smart-log nvme0 > "$TMP/slow" 2>&1 &
SLOW=$!
sleep 0.5
# answered while smart-log still waits (it waits until the unhang below):
# a status queued behind it would never come back, and fails at the bound
timeout 10 "$C" -s "$SOCK" --json status > "$TMP/st2" 2>&1 ||
	fail "status while smart-log waits: exit $? (124: not answered within 10 s): $(cat "$TMP/st2")"
kill -0 $SLOW 2> /dev/null || fail "smart-log did not wait for the hung device: $(cat "$TMP/slow")"
ctl inject nvme0 unhang > "$TMP/out" 2>&1 || fail "inject unhang: $(cat "$TMP/out")"
wait $SLOW || fail "smart-log after unhang: exit $?: $(cat "$TMP/slow")"
[ "$(json "$TMP/slow" 'd["ok"], d["temperature"]')" = "(True, 310)" ] || fail "smart-log after unhang: $(cat "$TMP/slow")"

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "nvmefsd exit $DAEMON_RC"
finish
