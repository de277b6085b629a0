#!/bin/sh
# t-export-units.sh - the export units ride a crash of nvmefs.service and
# follow a stop or restart that was asked for, under a real systemd.  A
# systemd user manager (Debian's systemd, in a PID and mount namespace of
# its own, with a private /run and a cgroup of its own) loads stand-ins:
# nvmefs.service with the shipped unit's ExecStartPost= and ExecStop=
# hooks, Restart=on-failure, and a main process that notes, when it gets
# SIGTERM, whether the exports are still active; nvmefs-nbd@.service and
# nvmefs-nvmet@.service with the shipped units' dependencies on
# nvmefs.service and their [Install] (a sleep and a oneshot in place of
# the servers; `systemctl` in the hooks is the user manager's).  Enabled
# and started:
# - kill -9 of the stand-in daemon: it is restarted, and neither export is
#   restarted or stopped (same pid; same activation time);
# - systemctl reload nvmefs: neither is touched either;
# - systemctl restart nvmefs: both exports were stopped before the daemon
#   got SIGTERM and are running again after (new pid, new time);
# - systemctl stop nvmefs: both were stopped before its SIGTERM;
# - systemctl start nvmefs: both start again.
# The units with Requires=, BindsTo=, PartOf= or StopPropagatedFrom= in
# place of Wants= fail the first check (systemd restarts or stops them).
# transport-independent: stand-ins under a systemd user manager, no nvmefsd
. "$(dirname "$0")/lib.sh"
lib_init
SD=/usr/lib/systemd/systemd
[ -x "$SD" ] || SD=/lib/systemd/systemd
[ -x "$SD" ] || skip "no systemd binary"
command -v systemctl > /dev/null && command -v unshare > /dev/null || skip "systemctl or unshare missing"
# a cgroup v2 hierarchy to give the manager a cgroup of its own
CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$CG2" ] && [ -w "$CG2" ] || skip "no writable cgroup2 mount"
CG=$CG2/nvmefs-units-test.$$
mkdir "$CG" || skip "cannot create a cgroup in $CG2"
# (the namespace's processes are gone once its first one exits; the
# manager's cgroups may take a moment to empty)
cg_remove() {
	i=0
	while [ -d "$CG" ] && [ $i -lt 50 ]; do
		find "$CG" -depth -type d -exec rmdir {} \; 2> /dev/null
		[ -d "$CG" ] && sleep 0.1
		i=$((i + 1))
	done
	[ ! -d "$CG" ] || echo "FAIL: cgroup $CG left"
}
trap 'cg_remove; lib_cleanup' EXIT

U=$TMP/home/.config/systemd/user
mkdir -p "$U" "$TMP/bin"
# (UNITS_DIR: another copy of systemd/, to see this test fail)
S=${UNITS_DIR:-$ROOT/systemd}
# the stand-in daemon: on SIGTERM, note which exports are still active
cat > "$TMP/bin/daemon" <<EOF
#!/bin/sh
# st UNIT: its state, asked again should the manager not answer at once
st() {
	for i in 1 2 3 4 5; do
		v=\$(systemctl is-active "\$1" 2> /dev/null)
		[ -n "\$v" ] && break
		sleep 0.2
	done
	echo "\${v:-unknown}"
}
# (TERM ignored first: the manager signals every process of the unit's
# cgroup, and would kill the command substitutions the trap forks, whose
# shells do not inherit the trap but do inherit an ignored signal)
trap 'trap "" TERM; echo "SIGTERM: nbd \$(st nvmefs-nbd@a.service) nvmet \$(st nvmefs-nvmet@b.service)" >> $TMP/trace; exit 0' TERM
while :; do sleep 0.1; done
EOF
# systemctl in the hooks talks to this manager
printf '#!/bin/sh\nexec %s --user "$@"\n' "$(command -v systemctl)" > "$TMP/bin/systemctl"
chmod +x "$TMP/bin/daemon" "$TMP/bin/systemctl"
{
	printf '[Service]\nExecStart=%s/bin/daemon\nExecReload=/bin/true\nRestart=on-failure\nRestartSec=1\n' "$TMP"
	grep -E '^Exec(StartPost|Stop)=' "$S/nvmefs.service"
} > "$U/nvmefs.service"
for m in nbd nvmet; do
	{
		echo "[Unit]"
		grep -E '^(Wants|Requires|Requisite|BindsTo|PartOf|After|Before|StopPropagatedFrom)=' "$S/nvmefs-$m@.service" |
			grep 'nvmefs\.service' | sed 's/ [^ ]*\.\(target\|mount\)//g'
		if [ $m = nbd ]; then
			printf '[Service]\nExecStart=/bin/sleep 1000\n'
		else
			printf '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n'
		fi
		sed -n '/^\[Install\]/,$p' "$S/nvmefs-$m@.service"
	} > "$U/nvmefs-$m@.service"
done
grep -q '^ExecStop=' "$U/nvmefs.service" && grep -q '^ExecStartPost=' "$U/nvmefs.service" ||
	fail "nvmefs.service has no ExecStop= or ExecStartPost= hook"

cat > "$TMP/inner.sh" <<'EOF'
set -u
T=$1 SD=$2
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system /run/user/0
export XDG_RUNTIME_DIR=/run/user/0 HOME=$T/home PATH=$T/bin:$PATH
export DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/0/systemd/private
"$SD" --user > "$T/manager.log" 2>&1 &
i=0
while [ ! -S /run/user/0/systemd/private ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
state() {
	echo "$(systemctl show -p MainPID --value nvmefs-nbd@a.service)" \
		"$(systemctl is-active nvmefs-nbd@a.service)" \
		"$(systemctl show -p ActiveEnterTimestampMonotonic --value nvmefs-nvmet@b.service)" \
		"$(systemctl is-active nvmefs-nvmet@b.service)"
}
# wait_daemon OLDPID: nvmefs.service active with another main pid
wait_daemon() {
	i=0
	while [ $i -lt 100 ]; do
		p=$(systemctl show -p MainPID --value nvmefs.service)
		[ "$p" != 0 ] && [ "$p" != "$1" ] && [ "$(systemctl is-active nvmefs.service)" = active ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
# settle: no job left
settle() {
	i=0
	while [ -n "$(systemctl list-jobs --no-legend)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
}
# the units' processes (the hooks) see the wrapper and reach this manager
systemctl set-environment "PATH=$PATH" "XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR" \
	"DBUS_SESSION_BUS_ADDRESS=$DBUS_SESSION_BUS_ADDRESS"
systemctl enable nvmefs-nbd@a.service nvmefs-nvmet@b.service 2> /dev/null
systemctl start nvmefs.service
settle
echo "start: $(state)"
d=$(systemctl show -p MainPID --value nvmefs.service)
kill -9 "$d"
wait_daemon "$d" || echo "no restart after kill -9"
sleep 0.5
settle
echo "kill: $(state)"
systemctl reload nvmefs.service
settle
echo "reload: $(state)"
systemctl restart nvmefs.service
settle
echo "restart: $(state)"
systemctl stop nvmefs.service
settle
echo "stop: $(state)"
systemctl start nvmefs.service
settle
echo "start again: $(state)"
systemctl exit
EOF
: > "$TMP/trace"
sh -c 'echo $$ > "$1/cgroup.procs" && exec unshare -m -p -f --mount-proc sh "$2/inner.sh" "$2" "$3"' \
	sh "$CG" "$TMP" "$SD" > "$TMP/out" 2>&1
cat "$TMP/out" "$TMP/trace"
v() { sed -n "s/^$1: //p" "$TMP/out"; }
set -- $(v start)
[ "${2:-}" = active ] && [ "${4:-}" = active ] || fail "the exports did not start with nvmefs.service: $(v start)"
s0="$*"
[ "$(v kill)" = "$s0" ] || fail "kill -9 of the daemon: the exports were touched ($s0 -> $(v kill))"
[ "$(v reload)" = "$s0" ] || fail "reload: the exports were touched ($s0 -> $(v reload))"
set -- $(v restart)
[ "${2:-}" = active ] && [ "${4:-}" = active ] || fail "restart: the exports are not running again: $*"
[ "$1" != "$(echo "$s0" | cut -d' ' -f1)" ] && [ "$3" != "$(echo "$s0" | cut -d' ' -f3)" ] ||
	fail "restart: the exports were not restarted ($s0 -> $*)"
[ "$(sed -n 1p "$TMP/trace")" = "SIGTERM: nbd inactive nvmet inactive" ] ||
	fail "restart: the daemon got SIGTERM with an export still active: $(sed -n 1p "$TMP/trace")"
set -- $(v stop)
[ "${2:-}" != active ] && [ "${4:-}" != active ] || fail "stop: an export still runs: $*"
[ "$(sed -n 2p "$TMP/trace")" = "SIGTERM: nbd inactive nvmet inactive" ] ||
	fail "stop: the daemon got SIGTERM with an export still active: $(sed -n 2p "$TMP/trace")"
set -- $(v "start again")
[ "${2:-}" = active ] && [ "${4:-}" = active ] || fail "start after a stop: the exports did not start: $*"
grep -iE 'warn|unknown|invalid' "$TMP/manager.log" | grep -i nvmefs && fail "the manager complained about the units"
finish
