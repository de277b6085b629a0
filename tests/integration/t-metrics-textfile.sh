#!/bin/sh
# t-metrics-textfile.sh - nvmefs-metrics.service as make install writes it:
# its ExecStart, run as systemd would run it against a running daemon, leaves
# node_exporter's textfile collector a whole nvmefs.prom that promtool
# accepts, and nothing else; run again, it replaces the file; with the
# daemon gone it fails and leaves the last file as it was.  Both units
# (service and timer) verify, and systemd-analyze security scores the
# service SAFE.  The file has each namespace's size, and every
# per-controller series is nvmefs_controller_* (none nvmefs_ctrl_*).
# transport-independent: the metrics service writes the admin socket's metrics to a file
. "$(dirname "$0")/lib.sh"
lib_init
command -v promtool > /dev/null || fail "promtool is not installed (scripts/deps.sh test installs it)"
P=$TMP/p
TF=$P/textfile
mkdir -p "$TF"
make -s -C "$ROOT" -o programs B="$BUILD" PREFIX="$P" SYSCONFDIR="$P/etc" UNITDIR="$P/lib/systemd/system" \
	TEXTFILEDIR="$TF" install > /dev/null || { fail "make install"; finish; }
S=$P/lib/systemd/system/nvmefs-metrics.service
[ -f "$S" ] && [ -f "$P/lib/systemd/system/nvmefs-metrics.timer" ] || { fail "units not installed"; finish; }
grep -q "@[A-Z]*@" "$S" && fail "a placeholder left in $S: $(grep "@[A-Z]*@" "$S")"
if command -v systemd-analyze > /dev/null; then
	(cd "$P/lib/systemd/system" && MANPATH=$P/share/man systemd-analyze verify nvmefs-metrics.service \
		nvmefs-metrics.timer) > "$TMP/verify" 2>&1 || fail "systemd-analyze verify: $(cat "$TMP/verify")"
fi
# the sandbox: it connects to a socket and writes one file, so it is held
# to SAFE (at most 1.0; 7.5 EXPOSED before it was sandboxed)
if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
	score=$(systemd-analyze security --offline=true "$S" 2>/dev/null |
		sed -n 's/^.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
	echo "systemd-analyze security: nvmefs-metrics.service ${score:-?}"
	[ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 1.0) }' ||
		fail "nvmefs-metrics.service: exposure ${score:-unknown}, want 1.0 or less"
fi

conf_sim nvme0 16M backing=ram
cp "$CONF" "$P/etc/nvmefs/nvmefs.conf"
CONF=$P/etc/nvmefs/nvmefs.conf
daemon_start nvme0n1 || { fail "start"; finish; }
dd if=/dev/zero of="$MNT/nvme0n1" bs=64k count=4 oflag=direct conv=notrunc status=none || fail "write"

# ExecStart as systemd runs it: $$ is its escape of $
cmd=$(sed -n 's/^ExecStart=//p' "$S" | sed 's/\$\$/$/g')
run_unit() { eval "$cmd"; }
run_unit || fail "ExecStart failed against a running daemon"
[ -s "$TF/nvmefs.prom" ] || { fail "no $TF/nvmefs.prom"; finish; }
promtool check metrics < "$TF/nvmefs.prom" > "$TMP/lint" 2>&1 || fail "promtool: $(cat "$TMP/lint")"
grep -q '^nvmefs_fuse_requests_total{op="write"} [1-9]' "$TF/nvmefs.prom" ||
	fail "the writes are not in the file"
# a namespace's size; one prefix for the controllers' series
grep -q '^nvmefs_namespace_size_bytes{namespace="nvme0n1",controller="nvme0"} 16777216$' "$TF/nvmefs.prom" ||
	fail "no size of nvme0n1 in the file"
grep -q '^nvmefs_ctrl_' "$TF/nvmefs.prom" && fail "nvmefs_ctrl_* series: $(grep -c '^nvmefs_ctrl_' "$TF/nvmefs.prom")"
[ "$(ls "$TF")" = nvmefs.prom ] || fail "left in the directory: $(ls "$TF")"
# node_exporter drops a textfile series named like one of its own (it has a
# process_start_time_seconds): every name is nvmefs's
other=$(grep -v '^#' "$TF/nvmefs.prom" | grep -v '^nvmefs_' | head -n 3)
[ -z "$other" ] || fail "series not named nvmefs_*: $other"
ino=$(stat -c %i "$TF/nvmefs.prom")
sleep 1
run_unit || fail "second run failed"
[ "$(stat -c %i "$TF/nvmefs.prom")" != "$ino" ] || fail "the file was rewritten in place, not renamed over"
[ "$(ls "$TF")" = nvmefs.prom ] || fail "left after the second run: $(ls "$TF")"

daemon_stop
cp "$TF/nvmefs.prom" "$TMP/last"
run_unit 2> "$TMP/err" && fail "ExecStart succeeded without a daemon"
cmp -s "$TF/nvmefs.prom" "$TMP/last" || fail "the last file changed when the daemon was gone"
[ "$(ls "$TF")" = nvmefs.prom ] || fail "left after a failed run: $(ls "$TF")"
grep -q "cannot connect" "$TMP/err" || fail "no reason on stderr: $(cat "$TMP/err")"
echo "textfile: $(grep -c '^nvmefs_' "$TF/nvmefs.prom") series, promtool accepts them"
finish
