#!/bin/sh
# make install / uninstall into a private prefix: every file lands where it
# should, the systemd unit verifies, the man pages render, uninstall removes
# all but the config.
# transport-independent: make install and uninstall; the installed daemon runs as every other test's does
set -eu
: "${BUILD:?}" "${ROOT:?}"
P=$(mktemp -d)
trap 'rm -rf "$P" "$P.effective"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
M="make -s -C $ROOT -o programs B=$BUILD PREFIX=$P SYSCONFDIR=$P/etc UNITDIR=$P/lib/systemd/system"

$M install >/dev/null
for f in sbin/nvmefsd bin/nvmefsctl bin/nvmefs-perf sbin/vfio-bind sbin/nvmefs-export etc/nvmefs/nvmefs.conf \
	lib/systemd/system/nvmefs.service lib/systemd/system/nvmefs-metrics.service \
	lib/systemd/system/nvmefs-nbd@.service lib/systemd/system/nvmefs-nvmet@.service \
	lib/systemd/system/nvmefs-metrics.timer lib/systemd/system/nvmefs-vfio-bind.service \
	share/bash-completion/completions/nvmefsctl share/nvmefs/grafana/nvmefs.json \
	share/nvmefs/prometheus/nvmefs-alerts.yml; do
	[ -f "$P/$f" ] || fail "missing $f"
done
# every man page of the tree, and one for each program installed; each
# names the version installed (debian/changelog's)
VERSION=$(head -n 1 "$ROOT/debian/changelog" | cut -d ' ' -f 2 | tr -d '()')
for m in "$ROOT"/docs/man/*.[158]; do
	s=${m##*.}
	[ -f "$P/share/man/man$s/$(basename "$m")" ] || fail "missing man page $(basename "$m")"
	head -n 1 "$P/share/man/man$s/$(basename "$m")" | grep -q "\"nvmefs $VERSION\"" ||
		fail "$(basename "$m") does not name version $VERSION: $(head -n 1 "$P/share/man/man$s/$(basename "$m")")"
done
[ -d "$P/etc/nvmefs/export" ] || fail "missing etc/nvmefs/export (the exports' settings)"
for p in sbin/nvmefsd bin/nvmefsctl bin/nvmefs-perf sbin/vfio-bind sbin/nvmefs-export; do
	n=$(basename "$p")
	ls "$P"/share/man/man[18]/"$n".[18] > /dev/null 2>&1 || fail "$p has no man page"
	[ -x "$P/$p" ] || fail "$p not executable"
done
[ -x "$P/sbin/nvmefsd" ] || fail "nvmefsd not executable"
grep -q "^ExecStart=$P/sbin/nvmefsd -f -c $P/etc/nvmefs/nvmefs.conf\$" "$P/lib/systemd/system/nvmefs.service" ||
	fail "unit's ExecStart does not name the installed paths"
grep -q "^ExecReload=$P/bin/nvmefsctl -c $P/etc/nvmefs/nvmefs.conf restart\$" "$P/lib/systemd/system/nvmefs.service" ||
	fail "unit's ExecReload is not the installed nvmefsctl restart"
# the export units run the installed nvmefs-export on the installed settings
for m in nbd nvmet; do
	grep -q "^ExecStart=$P/sbin/nvmefs-export -c $P/etc/nvmefs/export/%i.conf $m" \
		"$P/lib/systemd/system/nvmefs-$m@.service" || fail "nvmefs-$m@.service does not run the installed nvmefs-export"
	# no dependency that systemd propagates a restart of nvmefs.service
	# through (a restart after a crash would cut the export's clients off)
	grep -Eq '^(Requires|BindsTo|PartOf|StopPropagatedFrom|Requisite)=.*nvmefs\.service' \
		"$P/lib/systemd/system/nvmefs-$m@.service" && fail "nvmefs-$m@.service is bound to nvmefs.service"
	grep -q '^WantedBy=nvmefs.service$' "$P/lib/systemd/system/nvmefs-$m@.service" ||
		fail "nvmefs-$m@.service is not enabled into nvmefs.service"
done
"$P/sbin/nvmefsd" --check-config -c "$P/etc/nvmefs/nvmefs.conf" > "$P.effective" || fail "installed config invalid"

# A RuntimeDirectory= that is or holds the mountpoint breaks Restart= after a
# kill -9: systemd's chown of it fails on the dead FUSE mount (ENOTCONN).
U=$P/lib/systemd/system/nvmefs.service
mp=$(sed -n 's/^mountpoint = //p' "$P.effective")
rm -f "$P.effective"
[ -n "$mp" ] || fail "no mountpoint in the effective config"
for rd in $(sed -n 's/^RuntimeDirectory=//p' "$U"); do
	case "$mp/" in
	"/run/${rd%/}/"*) fail "RuntimeDirectory=$rd holds the mountpoint $mp" ;;
	esac
done
echo "no runtime directory holds the mountpoint $mp"

# The stop timeout must outlast the longest stop: the drain's cap
# (LC_DRAIN_MAX_S in lifecycle.h), the cancel phase (the engine's
# NVME_CANCEL_MAX_MS + 10 s), the reactors' end (LC_JOIN_MAX_S) and the
# shutdown (NVME_SHUTDOWN_MAX_MS + 5 s), as lifecycle.h sums them; and the
# TimeoutStopSec lifecycle.h asserts the sum against is the unit's.
LCH=$ROOT/src/daemon/lifecycle.h
drain=$(sed -n 's/^#define LC_DRAIN_MAX_S \([0-9]*\).*/\1/p' "$LCH")
cancel=$(sed -n 's/^#define NVME_CANCEL_MAX_MS \([0-9]*\)u.*/\1/p' "$ROOT/src/engine/nvme.h")
shn=$(sed -n 's/^#define NVME_SHUTDOWN_MAX_MS \([0-9]*\)u.*/\1/p' "$ROOT/src/engine/nvme.h")
join=$(sed -n 's/^#define LC_JOIN_MAX_S \([0-9]*\).*/\1/p' "$LCH")
asserted=$(sed -n 's/^#define LC_UNIT_TIMEOUT_STOP_S \([0-9]*\).*/\1/p' "$LCH")
grep -q '^#define LC_STOP_MAX_S (LC_DRAIN_MAX_S + LC_CANCEL_MAX_S + LC_JOIN_MAX_S + LC_SHUTDOWN_MAX_S)' "$LCH" ||
	fail "lifecycle.h's LC_STOP_MAX_S is not the sum this test checks"
grep -q '^#define LC_CANCEL_MAX_S (NVME_CANCEL_MAX_MS / 1000 + 10)' "$LCH" &&
	grep -q '^#define LC_SHUTDOWN_MAX_S (NVME_SHUTDOWN_MAX_MS / 1000 + 5)' "$LCH" ||
	fail "lifecycle.h's cancel or shutdown bound is not the one this test checks"
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$U")
if [ -z "$drain" ] || [ -z "$cancel" ] || [ -z "$join" ] || [ -z "$shn" ] || [ -z "$stop" ]; then
	fail "cannot read the drain cap ($drain), cancel cap ($cancel), shutdown cap ($shn) or TimeoutStopSec ($stop)"
else
	bound=$((drain + cancel / 1000 + 10 + join + shn / 1000 + 5))
	if [ "$stop" -le "$bound" ]; then
		fail "TimeoutStopSec=$stop is not above the stop's bound $bound s"
	else
		echo "TimeoutStopSec=$stop > the stop's bound $bound s (drain $drain, cancel $((cancel / 1000 + 10)), join $join, shutdown $((shn / 1000 + 5)))"
	fi
fi
[ "$asserted" = "$stop" ] ||
	fail "lifecycle.h asserts the stop's bound against TimeoutStopSec=$asserted, the unit says $stop"

# the unit does not restart after a usage or config error (nvmefsd(8)): the
# statuses it lists are options.h's
usage=$(sed -n 's/^\tOPT_EXIT_USAGE = \([0-9]*\),.*/\1/p' "$ROOT/src/daemon/options.h")
config=$(sed -n 's/^\tOPT_EXIT_CONFIG = \([0-9]*\),.*/\1/p' "$ROOT/src/daemon/options.h")
prevent=$(sed -n 's/^RestartPreventExitStatus=//p' "$U")
[ -n "$usage" ] && [ -n "$config" ] && [ "$prevent" = "$usage $config" ] ||
	fail "RestartPreventExitStatus=$prevent, want the usage ($usage) and config ($config) statuses"

# make run installs what building and running need, not the test, VM or
# benchmark tools (scripts/deps.sh run)
runpkgs=$(sh -c '. /dev/stdin; echo $BUILD' <<EOS
$(sed -n '/^BUILD="/,/"$/p' "$ROOT/scripts/deps.sh")
EOS
)
[ -n "$runpkgs" ] || fail "cannot read deps.sh's BUILD list"
for p in $runpkgs; do
	case $p in qemu* | clang* | valgrind | fio | nbdkit | gnuplot*) fail "make run would install $p" ;; esac
done
grep -q '^run:$' "$ROOT/Makefile" && grep -q '^	@sh scripts/deps.sh run$' "$ROOT/Makefile" ||
	fail "make run does not install with deps.sh run"

if command -v systemd-analyze >/dev/null; then
	MANPATH=$P/share/man systemd-analyze verify "$P/lib/systemd/system/nvmefs.service" ||
		fail "systemd-analyze verify"
	# the templates, as instances, beside nvmefs.service they order after
	(cd "$P/lib/systemd/system" && MANPATH=$P/share/man SYSTEMD_UNIT_PATH=$P/lib/systemd/system: \
		systemd-analyze verify nvmefs-nbd@test.service nvmefs-nvmet@test.service) ||
		fail "systemd-analyze verify of the export units"
	echo "units verify"
else
	echo "systemd-analyze missing: unit not verified"
fi
for m in "$P"/share/man/man*/*; do
	out=$(MANWIDTH=80 man -l "$m" 2>&1 | col -b) || fail "man -l $m"
	echo "$out" | grep -q NAME || fail "$m renders without a NAME section"
	w=$(groff -man -Tutf8 -ww -z "$m" 2>&1) || true
	[ -z "$w" ] || fail "groff warnings in $m: $w"
done
echo "man pages render"

# a second install keeps an edited config
echo "# edited" >> "$P/etc/nvmefs/nvmefs.conf"
$M install >/dev/null
tail -n 1 "$P/etc/nvmefs/nvmefs.conf" | grep -q '^# edited$' || fail "install overwrote the config"

$M uninstall >/dev/null
left=$(cd "$P" && find . -type f | sort)
[ "$left" = "./etc/nvmefs/nvmefs.conf" ] || fail "uninstall left: $left"
echo "install and uninstall ok"
