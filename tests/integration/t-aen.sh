#!/bin/sh
# t-aen.sh - asynchronous events and namespace changes through a running
# nvmefsd over the software controller, seen by the engine, the files, the
# health cache and the metrics:
# - nvmefsctl inject warn raises a SMART event the engine reads (its log
#   says so, smart-log shows the warning and the values it is about); then
#   status and the metrics show each warning, and the log names it once; a
#   cleared warning raises no event (as the spec says): a later timed read
#   (health_interval = 1) takes it out of the metrics.  Each "then" is a
#   wait of 10 s at most (a busy machine), not a time asserted;
# - inject ns-add, ns-resize (grow, then a refused shrink) and ns-remove
#   raise Namespace Attribute Changed events that the engine follows (its
#   log names each change) and the mount follows: a new file appears and
#   holds what is written to it; a grown file's size follows and I/O past
#   the old end works; a shrink is refused with a clear line and the file's
#   I/O fails with EIO; a removed file leaves the directory and a handle
#   open on it fails with EIO; namespace 1's data stay intact throughout;
# - the usage errors of the new injections.
. "$(dirname "$0")/lib.sh"
lib_init_ctl
SOCK=$TMP/admin.sock
NS=$MNT/nvme0n1
mkdir "$MNT"
DAEMON_EXTRA="health_interval = 1"
conf_sim nvme0 64M block_size=4096
daemon_start nvme0n1 || { fail "start"; finish; }


# expect_log PATTERN WHAT: the daemon logs PATTERN (10 s at most)
expect_log() {
	wait_until 10 grep -Eq "$1" "$LOG" || { fail "$2: no '$1' in the daemon's log"; return 1; }
}

# crit WARNING: the metric of that critical warning bit
crit() {
	ctl metrics | awk -v w="warning=\"$1\"" '
		index($1, "nvmefs_controller_critical_warning{") == 1 && index($1, w) { print $2; exit }'
}
crit_is() { [ "$(crit "$1")" = "$2" ]; }
listed() { ls "$MNT" | grep -qx "$1"; }
unlisted() { ! listed "$1"; }
size_is() { [ "$(stat -c %s "$1")" = "$2" ]; }

# namespace 1's data must survive every event below
io_ok() {
	cmp -n $((4 << 20)) "$TMP/ns1" "$NS" 2> "$TMP/dd" ||
		fail "$1: namespace 1 does not read back what was written: $(cat "$TMP/dd")"
}
head -c $((4 << 20)) /dev/urandom > "$TMP/ns1"
dd if="$TMP/ns1" of="$NS" bs=1M oflag=direct conv=notrunc status=none || fail "write namespace 1"
crit_is spare 0 || fail "a spare warning at start: $(crit spare)"

# ---- SMART critical warnings ----
out=$(ctl inject nvme0 warn spare 2>&1) || fail "inject warn spare: $out"
[ "$out" = "nvme0: warn spare injected; controller live" ] || fail "inject warn spare printed: $out"
expect_log 'nvme0: SMART/health event \(info 0x02\): critical warning 0x01' "warn spare"
wait_until 10 crit_is spare 1 || fail "the spare warning is not in the metrics 10 s on: $(crit spare)"
ctl status --json > "$TMP/st.json" || fail "status after warn"
[ "$(json "$TMP/st.json" 'd["controllers"][0]["health"]["critical_warnings"]')" = "['spare']" ] ||
	fail "status after warn spare: $(json "$TMP/st.json" 'd["controllers"][0]["health"]')"
ctl smart-log nvme0 --json > "$TMP/s.json" || fail "smart-log after warn"
[ "$(json "$TMP/s.json" 'd["critical_warning"], d["avail_spare"], d["spare_thresh"]')" = "(1, 5, 10)" ] ||
	fail "smart-log after warn spare: $(cat "$TMP/s.json")"
ctl inject nvme0 warn temperature > /dev/null || fail "inject warn temperature"
expect_log 'nvme0: SMART/health event \(info 0x01\): critical warning 0x03' "warn temperature"
wait_until 10 crit_is temperature 1 || fail "the temperature warning is not in the metrics 10 s on"
ctl smart-log nvme0 --json > "$TMP/s.json" || fail "smart-log after warn temperature"
[ "$(json "$TMP/s.json" 'd["critical_warning"], d["temperature"]')" = "(3, 348)" ] ||
	fail "smart-log after warn temperature: $(cat "$TMP/s.json")"
[ "$(grep -c "nvme0: SMART critical warning: spare " "$LOG")" = 1 ] ||
	fail "the spare warning was logged $(grep -c "SMART critical warning: spare " "$LOG") times, not once"
[ "$(grep -c "nvme0: SMART critical warning: temperature " "$LOG")" = 1 ] ||
	fail "the temperature warning was not logged once"
ctl stats --json > "$TMP/stats.json" || fail "stats after the warnings"
[ "$(json "$TMP/stats.json" '(lambda e: (e["smart"], e["aers_armed"] > 0, e["aer_errors"]))(d["controllers"][0]["events"])')" = "(2, True, 0)" ] ||
	fail "stats events after two warnings: $(json "$TMP/stats.json" 'd["controllers"][0]["events"]')"
ctl metrics | grep -q '^nvmefs_controller_async_events_total{controller="nvme0".*kind="smart"} 2$' ||
	fail "the metrics do not count two SMART events: $(ctl metrics | grep async_events)"
ctl inject nvme0 warn clear > /dev/null || fail "inject warn clear"
ctl smart-log nvme0 --json > "$TMP/s.json" || fail "smart-log after clear"
[ "$(json "$TMP/s.json" 'd["critical_warning"], d["avail_spare"]')" = "(0, 100)" ] ||
	fail "smart-log after warn clear: $(cat "$TMP/s.json")"
# no event for a cleared warning: the next timed read sees it
wait_until 10 crit_is spare 0 && wait_until 10 crit_is temperature 0 ||
	fail "the cleared warnings stay in the metrics 10 s on"
grep -q "nvme0: SMART critical warning cleared: spare, temperature" "$LOG" ||
	fail "the clearing is not logged"
io_ok "after the warnings"

# ---- namespaces: added, grown, shrunk (refused), removed ----
out=$(ctl inject nvme0 ns-add 2 4M 2>&1) || fail "inject ns-add: $out"
[ "$out" = "nvme0: ns-add namespace 2, 4194304 bytes injected; controller live" ] ||
	fail "inject ns-add printed: $out"
expect_log 'nvme0: namespace 2 attached \(1024 blocks of 4096 bytes\)' "ns-add"
expect_log 'nvme0: namespace 2 added: file nvme0n2' "ns-add in the mount"
wait_until 10 listed nvme0n2 || fail "nvme0n2 not listed 10 s after ns-add"
size_is "$MNT/nvme0n2" $((4 << 20)) || fail "nvme0n2 is $(stat -c %s "$MNT/nvme0n2") bytes"
head -c $((1 << 20)) /dev/urandom > "$TMP/ns2"
dd if="$TMP/ns2" of="$MNT/nvme0n2" bs=64k oflag=direct conv=notrunc status=none || fail "write nvme0n2"
cmp -n $((1 << 20)) "$TMP/ns2" "$MNT/nvme0n2" || fail "nvme0n2 does not read back"
# grown: the size follows, I/O past the old end works
ctl inject nvme0 ns-resize 1 128M > /dev/null || fail "inject ns-resize 1 128M"
expect_log 'nvme0: namespace 1 grew from 16384 to 32768 blocks' "ns-resize grow"
wait_until 10 size_is "$NS" $((128 << 20)) || fail "nvme0n1 is $(stat -c %s "$NS") bytes 10 s after growing"
dd if="$TMP/ns2" of="$NS" bs=64k seek=$((100 << 4)) oflag=direct conv=notrunc status=none ||
	fail "write past the old end of nvme0n1"
dd if="$NS" bs=64k skip=$((100 << 4)) count=16 iflag=direct status=none | cmp - "$TMP/ns2" ||
	fail "read past the old end of nvme0n1"
# shrunk: refused; the file keeps its size, its I/O fails with EIO
ctl inject nvme0 ns-resize 2 2M > /dev/null || fail "inject ns-resize 2 2M"
expect_log 'nvme0: namespace 2 shrank from 1024 to 512 blocks: refused' "ns-resize shrink"
size_is "$MNT/nvme0n2" $((4 << 20)) || fail "the refused shrink changed nvme0n2's size"
dd if="$MNT/nvme0n2" of=/dev/null bs=4k count=1 iflag=direct 2> "$TMP/dd" &&
	fail "a read of the shrunk namespace worked"
grep -q "Input/output error" "$TMP/dd" || fail "shrunk namespace read: $(cat "$TMP/dd")"
# removed: out of the directory; a handle open on it fails with EIO
exec 7< "$MNT/nvme0n2" || fail "open nvme0n2"
ctl inject nvme0 ns-remove 2 > /dev/null || fail "inject ns-remove 2"
expect_log 'nvme0: namespace 2 was detached' "ns-remove"
expect_log 'nvme0: namespace 2 removed: file gone' "ns-remove in the mount"
wait_until 10 unlisted nvme0n2 || fail "nvme0n2 still listed 10 s after ns-remove"
[ -e "$MNT/nvme0n2" ] && fail "nvme0n2 can still be found by name"
dd bs=4k count=1 of=/dev/null iflag=direct <&7 2> "$TMP/dd" &&
	fail "a read through a handle of the removed namespace worked"
grep -q "Input/output error" "$TMP/dd" || fail "removed namespace read: $(cat "$TMP/dd")"
exec 7<&-
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

daemon_alive || fail "nvmefsd died"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exit $DAEMON_RC"
grep -E "Sanitizer|runtime error" "$LOG" && fail "sanitizer report"
finish
