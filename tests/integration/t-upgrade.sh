#!/bin/sh
# t-upgrade.sh - a planned upgrade without an outage: nvmefsctl restart (and
# SIGUSR2) re-executes the installed binary in place while fio writes with
# verification, the mount and its open files staying.
#
# /dev/fuse (classic): the daemon runs from a copy of nvmefsd under the
# fd-store stand-in (tests/helpers/fdstore.c); fio (libaio, direct, iodepth
# 32, 4k/16k/64k/128k, randwrite then a crc32c verify, fixed seed) on a
# file-backed namespace while UPGRADES (3; SOAK=1: 10) restarts each
# replace the binary first (cp to a temporary name, mv over it, as a
# package upgrade does), the last by SIGUSR2: fio ends with error 0 and no
# verify failure; the pid stays, each restart execs the new file
# (/proc/PID/exe is no longer "(deleted)") and adopts the connection; the
# longest completion (the pause) goes to the log.  Before the last restart
# the config's mountpoint is changed: restart is refused with the reason
# and the daemon goes on serving.  Then the binary is replaced again and
# the config adds a controller: the restart re-executes the new image,
# which serves it (the old image does not add it in place instead).
# Without a service manager (no fd store)
# restart is refused and the daemon serves on.  SIGTERM during a restart's
# drain stops the daemon instead (no exec, unmounted).
# FUSE over io_uring (FUSE_TRANSPORT=uring): restart is refused, saying
# why, and the mount keeps working.
. "$(dirname "$0")/lib.sh"
lib_init
. "$(dirname "$0")/fdstore-lib.sh"
command -v fio >/dev/null || skip "fio missing"
UPGRADES=${UPGRADES:-3}
[ "${SOAK:-0}" = 1 ] && UPGRADES=10
SEED=${UPGRADE_SEED:-1}
FUSE_TRANSPORT=${FUSE_TRANSPORT:-classic}
[ "$FUSE_TRANSPORT" = auto ] && FUSE_TRANSPORT=classic
conf_sim nvme0 48M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread
cp "$CONF" "$TMP/base.conf"
# the installed binary: the daemon is started as this path
mkdir -p "$TMP/sbin"
BIN=$TMP/sbin/nvmefsd
STORE_BIN=$BIN
cp "$D" "$BIN"

# replace_binary: a package upgrade's way: a new file renamed over the old
replace_binary() {
	cp "$D" "$BIN.new" && mv -f "$BIN.new" "$BIN" || fail "replacing $BIN"
	case "$(readlink "/proc/$DPID/exe")" in
	*"(deleted)") ;;
	*) fail "the running image is not the replaced file: $(readlink "/proc/$DPID/exe")" ;;
	esac
}

if [ "$FUSE_TRANSPORT" = uring ]; then
	store_start -n 1 || finish
	grep -q "FUSE connection [0-9]* (uring) stored" "$LOG" || fail "no io_uring connection stored"
	ctl restart > "$TMP/out" 2>&1 && fail "restart over io_uring succeeded"
	grep -q "served over io_uring.*cannot adopt" "$TMP/out" || fail "restart over io_uring: $(cat "$TMP/out")"
	cat "$TMP/out"
	grep -q "restart refused: .*io_uring" "$LOG" || fail "the refusal is not in the log"
	head -c $((4 << 20)) /dev/urandom > "$TMP/a"
	dd if="$TMP/a" of="$MNT/nvme0n1" bs=1M oflag=direct conv=notrunc,fsync status=none || fail "write"
	cmp -n $((4 << 20)) "$TMP/a" "$MNT/nvme0n1" || fail "read back"
	[ "$(cat "$TMP/pid")" = "$DPID" ] || fail "the daemon was restarted"
	store_finish
fi

store_start -n 2 || finish
PID0=$DPID
resent=0
upgrade() { # K
	if [ "$1" = "$UPGRADES" ]; then
		# refused: another mountpoint in the config; nothing stops
		sed "s|^mountpoint = .*|mountpoint = $TMP/mnt2|" "$TMP/base.conf" > "$CONF"
		ctl restart > "$TMP/out" 2>&1 && fail "restart with another mountpoint succeeded"
		grep -q "would not adopt the connection: it is mounted at $MNT, the config says $TMP/mnt2" "$TMP/out" ||
			fail "changed mountpoint: $(cat "$TMP/out")"
		cat "$TMP/out"
		grep -q "restart refused: .*the config says $TMP/mnt2" "$LOG" || fail "the refusal is not in the log"
		[ -d "$TMP/mnt2" ] && fail "the refused restart made the new mountpoint"
		cp "$TMP/base.conf" "$CONF"
		kill -0 "$FP" 2>/dev/null || fail "fio ended at the refused restart"
	fi
	resent_now
	replace_binary
	t0=$(date +%s.%N)
	if [ "$1" = "$UPGRADES" ]; then
		kill -USR2 "$DPID"
	else
		ctl restart > "$TMP/out" 2>&1 || fail "restart $1: $(cat "$TMP/out")"
		grep -q "pid $DPID re-executes $BIN" "$TMP/out" || fail "restart $1: $(cat "$TMP/out")"
	fi
	wait_for "the kernel resends the requests" "$1" 15 || { fail "restart $1: not adopted within 15 s"; return 1; }
	wait_for "nvmefsd: info: ready:" $(($1 + 1)) 5 || fail "restart $1: not ready"
	echo "restart $1: serving again after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s (polled)"
	[ "$(cat "$TMP/pid")" = "$PID0" ] && kill -0 "$PID0" || fail "restart $1: the pid changed"
	[ "$(readlink "/proc/$DPID/exe")" = "$BIN" ] ||
		fail "restart $1: runs $(readlink "/proc/$DPID/exe"), not the new $BIN"
}
# the write phase lasts about as long as the restarts take
fio_cycles upgrade "$UPGRADES" 25 40 upgrade
k=$K
resent_now
n=$(grep -c "adopting FUSE connection" "$LOG")
x=$(grep -c "restart: controllers shut down, exec" "$LOG")
echo "$k restarts ($UPGRADES wanted), $x execs, $n adoptions, pid $PID0 throughout"
[ "$n" = "$UPGRADES" ] && [ "$x" = "$UPGRADES" ] || fail "$x execs, $n adoptions for $UPGRADES restarts"
grep -q "not adopting" "$LOG" && fail "an adoption was refused: $(grep "not adopting" "$LOG")"
# drained before the exec: nothing was left to resend
[ "$resent" = 0 ] || fail "$resent requests were resent"
grep -q "fdstore: pid [0-9]* exited" "$LOG" && fail "the daemon exited: $(grep "exited" "$LOG")"
# the unit's reload state: RELOADING=1, then the new image's READY=1
[ "$(grep -c "fdstore: RELOADING=1" "$LOG")" = "$UPGRADES" ] || fail "RELOADING=1 not sent at each restart"
# (the helper writes a line in pieces, which a daemon line may split: the
# line's end is what counts)
wait_for "READY=1$" $((UPGRADES + 1)) 10 ||
	fail "READY=1 not sent by each image: $(grep -c "READY=1$" "$LOG") for $((UPGRADES + 1)) images"

# an upgrade with a config that adds a controller: the new image takes it
# up as it starts (the old one does not add it in place and stay, which
# would leave the upgrade undone)
{ cat "$TMP/base.conf"; sim_section nvme1 16M "backing=$TMP/%c-%n.img"; } > "$CONF"
replace_binary
ctl restart > "$TMP/out" 2>&1 || fail "upgrade adding nvme1: $(cat "$TMP/out")"
grep -q "nvme1: adding" "$TMP/out" && fail "the old image added nvme1 in place: $(cat "$TMP/out")"
grep -q "pid $DPID re-executes $BIN" "$TMP/out" || fail "upgrade adding nvme1: $(cat "$TMP/out")"
wait_for "nvmefsd: info: ready:" $((UPGRADES + 2)) 15 || fail "upgrade adding nvme1: not ready"
[ "$(readlink "/proc/$DPID/exe")" = "$BIN" ] || fail "upgrade adding nvme1: runs $(readlink "/proc/$DPID/exe")"
ctl status > "$TMP/out" 2>&1 && grep -q "nvme1" "$TMP/out" || fail "nvme1 not served: $(cat "$TMP/out")"
[ -e "$MNT/nvme1n1" ] || fail "no $MNT/nvme1n1 after the upgrade"
dd if="$MNT/nvme0n1" of=/dev/null bs=64k count=4 iflag=direct status=none || fail "nvme0n1 after the upgrade"

# a stop during a restart's drain wins: no exec, the stop's unmount
ctl inject nvme0 delay 500 > /dev/null || fail "inject delay"
dd if=/dev/zero of="$MNT/nvme0n1" bs=64k count=8 oflag=direct conv=notrunc status=none 2>/dev/null &
DD=$!
sleep 0.2
ctl restart > "$TMP/out" 2>&1 || fail "restart before the stop: $(cat "$TMP/out")"
store_stop
wait $DD
[ "$SRC" = 0 ] || fail "stop during a restart: exit $SRC"
grep -q "stopping instead of restarting" "$LOG" || fail "the stop did not take over the restart"
[ "$(grep -c "restart: controllers shut down, exec" "$LOG")" = $((UPGRADES + 1)) ] || fail "an exec after the stop"
fuse_mounted && fail "still mounted after the stop"

# not under a service manager: nothing could adopt the mount should the exec
# fail, so the restart is refused and the daemon serves on
D=$BIN
daemon_start nvme0n1 || finish
ctl restart > "$TMP/out" 2>&1 && fail "restart without an fd store succeeded"
grep -q "not in the service manager's fd store" "$TMP/out" || fail "no fd store: $(cat "$TMP/out")"
dd if="$MNT/nvme0n1" of=/dev/null bs=64k count=4 iflag=direct status=none || fail "I/O after the refusal"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exit $DAEMON_RC"
grep -E "Sanitizer|runtime error" "$LOG" && fail "sanitizer report"
finish
