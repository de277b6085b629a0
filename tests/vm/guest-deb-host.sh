#!/bin/bash
# guest-deb-host.sh - in the Debian guest of t-deb-host.sh (systemd 252 as
# PID 1, run by vmrun.service from the share, /mnt/share): the nvmefs
# package installed by apt and run by systemd over QEMU's NVMe controller
# (0000:00:01.0, behind the emulated IOMMU) and a file-backed software
# controller.  Nothing is started by hand: the units do it.
#   boot 1: install; the packaged config skips the start ("no controllers
#     configured"); a config naming both controllers, systemctl enable --now;
#     an unprivileged user of the nvmefs group, in a login session of its
#     own, runs fio crc32c verify rounds on both namespace files while the
#     daemon is killed twice (systemctl kill -s KILL), reloaded, and
#     upgraded by apt to the next version; the metrics timer's file through
#     promtool and node_exporter; NAMESPACE= in the journal; markers written
#     with fsync; a reload that applies a config change; a stop with the
#     software controller hung; then a reboot
#   boot 2: the units in order, the markers, apt purge, vfio-bind --unbind,
#     the kernel's nvme driver reads what nvmefs wrote
# Every check prints "ok: WHAT" or "NOT OK: WHAT"; each step "== STEP (at
# Ns)" with the guest's uptime, so that the host can time the steps.  Ends
# with "checks: N ok, M not ok"; exit 1 if a check failed.
# Environment (from the host, in /mnt/share/env): V and NEXT (the package
# versions), BDF (the controller), NS_BYTES (its namespace's size).
S=/mnt/share
. "$S/env"
CONF=/etc/nvmefs/nvmefs.conf
MNT=/run/nvmefs
DEB_LOG=/var/log/vmtest-apt.log
STATE=/var/lib/vmtest
export DEBIAN_FRONTEND=noninteractive SYSTEMD_PAGER= SYSTEMD_COLORS=0
n_ok=0
n_bad=0
# the versions as regular expressions ("0.1.0+next1": the + and the dots)
re() { printf '%s' "$1" | sed 's/[][\\.*^$+?(){}|]/\\&/g'; }
VR=$(re "$V")
NR=$(re "$NEXT")

step() { echo "== $* (at $(cut -d' ' -f1 /proc/uptime)s)"; }
ok() { n_ok=$((n_ok + 1)); echo "ok: $*"; }
bad() { n_bad=$((n_bad + 1)); echo "NOT OK: $*"; }
# c WHAT CMD...: CMD must succeed
c() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
# t WHAT REGEX CMD...: CMD must succeed and its output match REGEX; the
# output is shown, indented
t() {
	local what=$1 re=$2 out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc = 0 ] && echo "$out" | grep -Eq -- "$re"; then
		ok "$what"
	else
		bad "$what (exit $rc, output must match: $re)"
	fi
	echo "$out" | tail -n 12 | sed 's/^/    | /'
}
# wait_until SECS CMD...: poll CMD every 0.2 s until it succeeds
wait_until() {
	local end=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.2
	done
}
prop() { systemctl show -p "$1" --value "${2:-nvmefs.service}"; }
# systemctl status exits 3 for a unit that is not running: its text counts
status() { systemctl status --no-pager -n 20 nvmefs.service; true; }
ctl() { nvmefsctl -c "$CONF" "$@"; }
user() { su -l tester -c "$*"; }
# rounds TAG: fio rounds finished so far by the user's loop on TAG
rounds() { cat /home/tester/fio-$1/rounds 2> /dev/null | wc -l; }
# more_rounds N: wait until both loops have finished N more rounds (or one
# of them failed)
rounds_ge() {
	[ "$(rounds vfio)" -ge $1 ] && [ "$(rounds sim)" -ge $2 ] || [ -n "$(fio_failed)" ] ||
		! kill -0 $FIO 2> /dev/null
}
fio_failed() { cat /home/tester/fio-*/rounds 2> /dev/null | awk '$2 != 0'; }
more_rounds() {
	local a b
	a=$(($(rounds vfio) + $1)) b=$(($(rounds sim) + $1))
	wait_until 300 rounds_ge $a $b && [ -z "$(fio_failed)" ] && kill -0 $FIO 2> /dev/null || {
		bad "fio did not finish $1 more round(s) on both files in 300 s: $(fio_failed)"
		cat /run/vmtest/fio.log
		return 1
	}
}
now() { date +%s.%N; }
since() { echo "$1 $(now)" | awk '{ printf "%.1f", $2 - $1 }'; }
mount_id() { awk -v m=$MNT '$5 == m { print $1 }' /proc/self/mountinfo; }
served() { ctl status > /dev/null 2>&1 && [ "$(prop SubState)" = running ]; }
# the journal of nvmefs.service since a cursor file's position
journal_since() { journalctl -q --no-pager -o cat -u nvmefs.service --after-cursor="$(cat "$1")"; }
cursor() { journalctl -n 1 -o cat --show-cursor -u nvmefs.service | sed -n 's/^-- cursor: //p' > "$1"; }
marker() { printf 'nvmefs-marker %s %s\n' "$1" "$(cat $STATE/uuid)"; }

boot_times() {
	local us ui
	us=$(systemctl show -p UserspaceTimestampMonotonic --value)
	ui=$(prop ActiveEnterTimestampMonotonic multi-user.target)
	echo "measure: boot $VMRUN_BOOT: systemd started at $(awk -v t="$us" 'BEGIN { printf "%.1f", t / 1e6 }') s," \
		"multi-user.target at $(awk -v t="$ui" 'BEGIN { printf "%.1f", t / 1e6 }') s (guest uptime)"
}

boot1() {
	mkdir -p $STATE /run/vmtest
	cat /proc/sys/kernel/random/uuid > $STATE/uuid
	boot_times
	t "the guest runs systemd 252 as PID 1" "^systemd 252 " systemctl --version
	c "... PID 1 is systemd" [ "$(cat /proc/1/comm)" = systemd ]

	step "install $V"
	local t0
	t0=$(now)
	t "apt installs nvmefs_${V}_amd64.deb" "Setting up nvmefs \\($VR\\)" \
		apt-get install -y --no-install-recommends "$S/nvmefs_${V}_amd64.deb"
	echo "measure: apt install: $(since $t0) s"
	t "the nvmefs group exists" "^nvmefs:x:[0-9]+:" getent group nvmefs
	t "nvmefsd --version is $V" "^nvmefsd $VR\$" nvmefsd --version
	t "the config is a conffile" "^ /etc/nvmefs/nvmefs.conf [0-9a-f]{32}" \
		dpkg-query -W -f '${Conffiles}\n' nvmefs
	t "the packaged config is valid and names no controller" "# no \\[controller NAME\\] section" \
		nvmefsd --check-config -c $CONF
	c "nvmefs.service is enabled" systemctl -q is-enabled nvmefs.service
	c "nvmefs-metrics.timer is enabled" systemctl -q is-enabled nvmefs-metrics.timer
	c "... the start was attempted and skipped: no RAM disk served by surprise" \
		[ "$(prop ActiveState)" = inactive -a "$(prop ConditionResult)" = no ]
	t "systemctl status shows the skipped start" "Active: inactive \\(dead\\) \\(Result: exec-condition\\)" status
	t "... and why" "no controllers configured in $CONF" status
	t "... and the journal says why" "no controllers configured in $CONF" \
		journalctl -q --no-pager -o cat -u nvmefs.service
	c "... so the timer does not run (BindsTo=)" [ "$(prop ActiveState nvmefs-metrics.timer)" = inactive ]
	t "no unit failed" "^0 loaded units listed" systemctl list-units --failed --no-pager
	c "nothing is mounted at $MNT" [ -z "$(mount_id)" ]

	step "configure both controllers; systemctl enable --now nvmefs"
	install -d -m 0700 /var/lib/nvmefs
	# two vCPUs under emulation: one reactor, sleeping on interrupts (a
	# polling reactor would take a vCPU from fio and the kernel)
	sed -i 's/^#queues = 4$/queues = 1/; s/^mode = hybrid$/mode = interrupt/' $CONF
	cat >> $CONF <<EOF

[controller nvme0]
device = $BDF

[controller sim0]
device = sim
size = 64M
backing = /var/lib/nvmefs/%c-n%n.img
exec = thread
EOF
	t "nvmefsd --check-config accepts it" "^\\[controller sim0\\]" nvmefsd --check-config -c $CONF
	c "the controller is on the kernel's nvme driver still" \
		[ "$(basename "$(readlink /sys/bus/pci/devices/$BDF/driver)")" = nvme ]
	t0=$(now)
	t "systemctl enable --now nvmefs" "" systemctl enable --now nvmefs
	echo "measure: systemctl enable --now nvmefs: $(since $t0) s (it returns at READY=1)"
	if [ "$(prop ActiveState)" = active ]; then
		ok "nvmefs.service is active (READY=1 came)"
	else
		bad "nvmefs.service is not active: the rest would only wait"
		journalctl -q --no-pager -o cat -u nvmefs.service -u nvmefs-vfio-bind.service | tail -n 40
		echo "checks: $n_ok ok, $n_bad not ok"
		exit 1
	fi
	t "nvmefs-vfio-bind.service bound the controller" "$BDF: bound to vfio-pci \\(was nvme\\)" \
		journalctl -q --no-pager -o cat -u nvmefs-vfio-bind.service
	c "... it is on vfio-pci" [ "$(basename "$(readlink /sys/bus/pci/devices/$BDF/driver)")" = vfio-pci ]
	t "systemctl status shows the daemon's STATUS= line" \
		'Status: "serving 2 namespaces at /run/nvmefs"' status
	t "the FUSE mount is the host's (MountFlags=shared)" "fuse.nvmefs" findmnt -n -o FSTYPE $MNT
	c "the metrics timer runs with the daemon" [ "$(prop ActiveState nvmefs-metrics.timer)" = active ]
	t "the fd store holds the connection" "stored with the service manager" \
		journalctl -q --no-pager -o cat -u nvmefs.service

	step "an unprivileged user of the nvmefs group, in a login session of its own"
	useradd -m -s /bin/bash -G nvmefs tester
	# its user manager (user@UID.service, started by pam_systemd for a
	# login) stays between the logins below: starting one takes long
	# under emulation
	loginctl enable-linger tester
	c "tester's user manager runs" wait_until 120 systemctl -q is-active user@$(id -u tester).service
	# one login for all of these (each costs a logind session)
	user "id; cat /proc/self/cgroup; ls -l $MNT; dd if=/dev/urandom of=/tmp/x bs=64k count=16 status=none &&
		dd if=/tmp/x of=$MNT/nvme0n1 bs=64k seek=100 oflag=direct conv=notrunc,fsync status=none &&
		cmp -n 1M /tmp/x <(dd if=$MNT/nvme0n1 bs=64k skip=100 count=16 iflag=direct status=none) &&
		echo wrote and read" > /run/vmtest/login 2>&1
	login() { cat /run/vmtest/login; }
	t "tester is in the nvmefs group only for the files" "groups=.*\\(nvmefs\\)" login
	t "... in a logind session, not in the service" "/user-[0-9]+\\.slice/session-[a-z0-9]+\\.scope\$" login
	c "... not a child of nvmefs.service" sh -c "! grep -q nvmefs.service /run/vmtest/login"
	t "tester sees the QEMU controller's namespace: group nvmefs, mode 0660" \
		"^-rw-rw---- +1 root nvmefs +$NS_BYTES .* nvme0n1\$" login
	t "... and the software controller's" "^-rw-rw---- +1 root nvmefs +67108864 .* sim0n1\$" login
	t "tester writes and reads the QEMU controller's namespace" "^wrote and read$" login

	step "fio verify rounds on both files; systemctl kill -s KILL nvmefs twice"
	rm -f /run/vmtest/stop
	su -l tester -c "sh $S/guest-deb-fio.sh $MNT/nvme0n1 vfio & p=\$!; sh $S/guest-deb-fio.sh $MNT/sim0n1 sim &
		q=\$!; wait \$p; a=\$?; wait \$q; b=\$?; exit \$((a + b))" > /run/vmtest/fio.log 2>&1 &
	FIO=$!
	more_rounds 1 && ok "fio verifies on both files as tester"
	local k pid n conn
	# the FUSE connection the first run stored; each later run must adopt
	# this one (a fresh mount would be a new connection, its users' open
	# files lost)
	conn=$(journalctl -q --no-pager -o cat -u nvmefs.service |
		sed -n 's/^fdstore: FUSE connection \([0-9]*\) (classic) stored.*/\1/p' | tail -n 1)
	echo "    FUSE connection $conn"
	for k in 1 2; do
		pid=$(prop MainPID) n=$(prop NRestarts)
		cursor /run/vmtest/cur
		t0=$(now)
		systemctl kill -s KILL nvmefs
		c "kill $k: systemd restarts the daemon" wait_until 180 \
			sh -c "[ \$(systemctl show -p NRestarts --value nvmefs) = $((n + 1)) ] &&
				[ \$(systemctl show -p SubState --value nvmefs) = running ]"
		echo "measure: kill $k: serving again after $(since $t0) s"
		c "... a new pid" [ "$(prop MainPID)" != "$pid" ]
		t "... the fd store handed connection $conn back: adopted, the mount kept" \
			"adopting FUSE connection $conn at $MNT" journal_since /run/vmtest/cur
		more_rounds 1 && ok "... fio goes on verifying on both files"
	done

	step "systemctl reload nvmefs under fio"
	pid=$(prop MainPID) n=$(prop NRestarts)
	cursor /run/vmtest/cur
	t0=$(now)
	t "systemctl reload nvmefs" "" systemctl reload nvmefs
	c "... serving again" wait_until 120 served
	echo "measure: reload: serving again after $(since $t0) s"
	c "... the same pid, no restart" [ "$(prop MainPID)" = "$pid" -a "$(prop NRestarts)" = "$n" ]
	t "... re-executed in place" "re-executing it in place" journal_since /run/vmtest/cur
	t "... and adopted connection $conn" "adopting FUSE connection $conn at $MNT" journal_since /run/vmtest/cur
	more_rounds 1 && ok "... fio goes on verifying on both files"

	step "apt upgrade to $NEXT under fio"
	cursor /run/vmtest/cur
	t0=$(now)
	t "apt installs nvmefs_${NEXT}_amd64.deb: the postinst reloads the daemon" \
		"nvmefsd $VR replaced by $NR in place" \
		apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confold \
		"$S/nvmefs_${NEXT}_amd64.deb"
	c "... serving again" wait_until 120 served
	echo "measure: apt upgrade: serving $NEXT after $(since $t0) s"
	c "... the same pid, no restart" [ "$(prop MainPID)" = "$pid" -a "$(prop NRestarts)" = "$n" ]
	t "... the installed binary is $NEXT" "^nvmefsd $NR\$" nvmefsd --version
	t "... the running daemon is the new file" "^/usr/sbin/nvmefsd\$" readlink /proc/$pid/exe
	t "... and says it serves $NEXT" "nvmefs_build_info\\{version=\"$NR\"\\} 1" ctl metrics
	t "... it adopted connection $conn" "adopting FUSE connection $conn at $MNT" journal_since /run/vmtest/cur
	more_rounds 1 && ok "... fio goes on verifying on both files"

	step "stop fio"
	touch /run/vmtest/stop
	if wait $FIO; then ok "fio: every round on both files verified, 0 errors"; else bad "fio failed"; fi
	echo "measure: fio rounds: $(rounds vfio) on nvme0n1, $(rounds sim) on sim0n1"
	cat /run/vmtest/fio.log
	for f in /home/tester/fio-*/rounds; do sed "s|^|    $f: |" "$f"; done

	step "metrics: the timer's file, promtool, node_exporter"
	local prom=/var/lib/prometheus/node-exporter/nvmefs.prom
	c "the timer wrote $prom for $NEXT" wait_until 60 grep -q "^nvmefs_build_info{version=\"$NEXT\"} 1" $prom
	t "promtool check metrics accepts it" "" sh -c "promtool check metrics < $prom"
	c "... the metrics service ran in its sandbox" [ "$(prop Result nvmefs-metrics.service)" = success ]
	t "systemd-analyze security nvmefs-metrics.service (systemd 252)" "Overall exposure level .*: 0\\.[0-9] SAFE" \
		systemd-analyze security nvmefs-metrics.service --no-pager
	systemd-analyze security nvmefs.service --no-pager | tail -n 1
	c "node_exporter runs" [ "$(prop ActiveState prometheus-node-exporter.service)" = active ]
	wait_until 60 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9100' 2> /dev/null
	bash -c 'exec 3<>/dev/tcp/127.0.0.1/9100 && printf "GET /metrics HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
		> /run/vmtest/scrape
	scrape() { cat /run/vmtest/scrape; }
	t "node_exporter serves the textfile's nvmefs metrics" "^nvmefs_build_info\\{version=\"$NR\"\\} 1" scrape
	# not node_exporter's own process_start_time_seconds: the daemon's
	# start, as the file has it (node_exporter prints 1.7966e+09)
	local st got
	st=$(sed -n 's/^nvmefs_start_time_seconds //p' $prom)
	got=$(scrape | sed -n 's/^nvmefs_start_time_seconds //p')
	c "... nvmefs_start_time_seconds as the file has it ($st, served as $got)" \
		awk -v a="$st" -v b="$got" 'BEGIN { exit !(b != "" && a + 0 == b + 0) }'
	t "... the textfile read without error" "^node_textfile_scrape_error 0" scrape

	t "journalctl -u nvmefs -o verbose shows CONTROLLER=" "^ +CONTROLLER=(nvme0|sim0)\$" \
		journalctl -q --no-pager -u nvmefs.service -o verbose

	step "markers written with fsync, for the reboot"
	marker nvme0n1 > /run/vmtest/m-nvme0n1
	marker sim0n1 > /run/vmtest/m-sim0n1
	chmod 644 /run/vmtest/m-*
	t "tester writes a marker to each file with fsync" "^ok$" user "
		dd if=/run/vmtest/m-nvme0n1 of=$MNT/nvme0n1 bs=4096 seek=50000 conv=notrunc,sync,fsync status=none &&
		dd if=/run/vmtest/m-sim0n1 of=$MNT/sim0n1 bs=4096 seek=15000 conv=notrunc,sync,fsync status=none && echo ok"
	cp /run/vmtest/m-* $STATE/

	step "a reload applies a config change without an outage"
	sed -i 's/^io_timeout_ms = 5000$/io_timeout_ms = 600000/' $CONF
	pid=$(prop MainPID)
	t "systemctl reload nvmefs with io_timeout_ms = 600000" "" systemctl reload nvmefs
	c "... serving again" wait_until 60 served
	t "... the daemon runs with it" "^io_timeout_ms = 600000\$" ctl config
	c "... the same pid" [ "$(prop MainPID)" = "$pid" ]

	step "systemctl stop with the software controller hung"
	user "while dd if=/dev/zero of=$MNT/sim0n1 bs=64k count=64 oflag=direct conv=notrunc status=none; do :; done;
		echo writer ended > writer" > /dev/null 2>&1 &
	sleep 1
	t "nvmefsctl inject sim0 hang" "" ctl inject sim0 hang
	sleep 1
	t0=$(date +%s.%N)
	systemctl stop nvmefs
	t1=$(date +%s.%N)
	local dt
	dt=$(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }')
	echo "measure: systemctl stop with sim0 hung under a writer: $dt s"
	c "... it ended within TimeoutStopSec (120 s), with no SIGKILL" \
		[ "$(echo "$dt" | cut -d. -f1)" -lt 120 -a "$(prop Result)" = exit-code ]
	c "... the documented exit status 3 (requests ended with EIO)" [ "$(prop ExecMainStatus)" = 3 ]
	t "... and its reason in the journal" "stopped, after ending with EIO the requests the drain could not wait for: exit status 3" \
		journalctl -q --no-pager -o cat -u nvmefs.service
	c "... unmounted" [ -z "$(mount_id)" ]
	c "... the writer got its error and ended" wait_until 30 test -s /home/tester/writer
	c "... no restart after a stop" [ "$(prop ActiveState)" = failed ]
	sed -i 's/^io_timeout_ms = 600000$/io_timeout_ms = 5000/' $CONF

	step "reboot"
	journal_copy
	touch /run/vmrun/reboot
}

boot2() {
	mkdir -p /run/vmtest
	boot_times
	step "after the reboot: the units, in order"
	c "nvmefs.service is active again" [ "$(prop ActiveState)" = active ]
	c "the controller is on vfio-pci again" \
		[ "$(basename "$(readlink /sys/bus/pci/devices/$BDF/driver)")" = vfio-pci ]
	local bind start ready timer
	# a oneshot without RemainAfterExit= is never "active": when it ended
	bind=$(prop ExecMainExitTimestampMonotonic nvmefs-vfio-bind.service)
	start=$(prop InactiveExitTimestampMonotonic)
	ready=$(prop ActiveEnterTimestampMonotonic)
	timer=$(prop ActiveEnterTimestampMonotonic nvmefs-metrics.timer)
	echo "    vfio-bind done $bind, nvmefs started $start, ready $ready, timer $timer (us)"
	c "... vfio-bind before the daemon starts, the timer after it is ready" \
		[ "$bind" -gt 0 -a "$bind" -le "$start" -a "$ready" -le "$timer" ]
	t "systemctl status shows the daemon's STATUS= line" \
		'Status: "serving 2 namespaces at /run/nvmefs"' status
	t "the last boot's stop is in the journal" "stopped, after ending with EIO" \
		journalctl -q --no-pager -o cat -b -1 -u nvmefs.service
	t "the version is $NEXT" "^nvmefsd $NR\$" nvmefsd --version
	local f got
	for f in nvme0n1:50000 sim0n1:15000; do
		got=$(su -l tester -c "dd if=$MNT/${f%%:*} bs=4096 skip=${f#*:} count=1 iflag=direct status=none" | head -n 1)
		c "the fsync'd marker of ${f%%:*} is intact ('$got')" [ "$got" = "$(head -n 1 $STATE/m-${f%%:*})" ]
	done

	step "an upgrade the daemon refuses to take in place"
	# a controller that keeps its namespaces in RAM cannot be restarted in
	# place (its bytes would not survive the exec): installing the other
	# version (a downgrade) must leave the running daemon alone and say why
	cp $CONF /run/vmtest/conf
	printf '\n[controller ram0]\ndevice = sim\nsize = 16M\nbacking = ram\n' >> $CONF
	local pid
	pid=$(prop MainPID)
	t "dpkg installs $V over $NEXT: the reload is refused, and dpkg says why" \
		"restart refused: .*ram0 keeps its namespaces in memory" \
		dpkg -i --force-confold "$S/nvmefs_${V}_amd64.deb"
	c "... the daemon goes on serving, the same pid" [ "$(prop MainPID)" = "$pid" -a "$(prop SubState)" = running ]
	t "... still $NEXT" "nvmefs_build_info\\{version=\"$NR\"\\} 1" ctl metrics
	cp /run/vmtest/conf $CONF

	# a message about a namespace: the software controller's grows (an
	# Asynchronous Event the daemon follows)
	t "nvmefsctl inject sim0 ns-resize 1 80M" "" ctl inject sim0 ns-resize 1 80M
	c "... the daemon follows" wait_until 60 sh -c "journalctl -q -o cat -u nvmefs.service | grep -q 'sim0: namespace 1 grew'"
	t "journalctl -u nvmefs -o verbose shows NAMESPACE=" "^ +NAMESPACE=sim0n1\$" \
		journalctl -q --no-pager -u nvmefs.service -o verbose

	step "apt purge"
	t "apt purge nvmefs" "Purging configuration files for nvmefs" apt-get purge -y nvmefs
	c "... the daemon is gone" sh -c '! pgrep -x nvmefsd' 
	c "... the mount is gone" [ -z "$(mount_id)" ]
	c "... the units are gone" [ "$(prop LoadState)" = not-found -a "$(prop LoadState nvmefs-metrics.timer)" = not-found ]
	c "... the config is gone" [ ! -e /etc/nvmefs ]
	c "... and the metrics file" [ ! -e /var/lib/prometheus/node-exporter/nvmefs.prom ]
	c "... the backing files are kept" [ -f /var/lib/nvmefs/sim0-n1.img ]
	got=$(dd if=/var/lib/nvmefs/sim0-n1.img bs=4096 skip=15000 count=1 status=none | head -n 1)
	c "... with the marker in sim0-n1.img ('$got')" [ "$got" = "$(head -n 1 $STATE/m-sim0n1)" ]

	step "vfio-bind --unbind: the kernel's nvme driver reads what nvmefs wrote"
	t "vfio-bind --unbind gives it back to nvme" "bound to nvme \\(was vfio-pci\\)" sh $S/vfio-bind --unbind $BDF
	c "... /dev/nvme0n1 is there" wait_until 20 test -b /dev/nvme0n1
	got=$(dd if=/dev/nvme0n1 bs=4096 skip=50000 count=1 iflag=direct status=none | head -n 1)
	c "... the kernel driver reads nvmefs's marker ('$got')" [ "$got" = "$(head -n 1 $STATE/m-nvme0n1)" ]
}

# the units' journal of this boot, with monotonic times, for the host's
# test-logs (where a slow start spends its time)
journal_copy() {
	journalctl -q --no-pager -o short-monotonic -b -u nvmefs.service -u nvmefs-vfio-bind.service \
		-u nvmefs-metrics.service > "$S/journal-boot$VMRUN_BOOT.txt" 2>&1
}

case "$VMRUN_BOOT" in
1) boot1 ;;
2) boot2 ;;
*) bad "boot $VMRUN_BOOT: only two were planned" ;;
esac
step "done"
[ "$VMRUN_BOOT" = 1 ] && [ $n_bad = 0 ] || journal_copy
echo "checks: $n_ok ok, $n_bad not ok"
[ $n_bad = 0 ]
