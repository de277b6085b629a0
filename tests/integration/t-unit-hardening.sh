#!/bin/sh
# t-unit-hardening.sh - the systemd unit's sandbox, checked without systemd.
#
# 1. Every system call in systemd/syscalls.txt is allowed by the unit's
#    SystemCallFilter= (its groups expanded by systemd-analyze), and none is
#    one that ProtectClock=, ProtectHostname= or RestrictNamespaces= take away.
# 2. The daemon runs as the unit runs it, as far as that goes without
#    systemd: a private network namespace (PrivateNetwork=), the bounding set
#    of CapabilityBoundingSet=, UMask=, and through scripts/seccomp-exec the
#    filter of SystemCallFilter= (a call outside it kills), RestrictNamespaces=,
#    MemoryDenyWriteExecute= and NoNewPrivileges=.  The mount is visible here,
#    READY=1 reaches NOTIFY_SOCKET, I/O round-trips, nvmefsctl reaches the
#    admin socket from this network namespace, the modes are those configured
#    though the umask is 077 (a directory made above the mountpoint too: a
#    user other than root reads a namespace file), nothing is mapped writable
#    and executable, and SIGTERM stops it with status 0.
# 3. Controls: the same sandbox with mount(2) out of the filter is killed by
#    SIGSYS, and without CAP_SYS_ADMIN the daemon cannot mount.
# Runs on the transport of FUSE_TRANSPORT (run.sh: classic, or uring in the
# integration-uring suite).
. "$(dirname "$0")/lib.sh"
lib_init
for t in systemd-analyze setpriv unshare python3 dd cmp stat; do
	command -v $t >/dev/null || skip "$t missing"
done
python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("seccomp"))' ||
	skip "no libseccomp (libseccomp2)"
U=$ROOT/systemd/nvmefs.service
LIST=$ROOT/systemd/syscalls.txt
C=$BUILD/nvmefsctl

unit_val() { sed -n "s/^$1=//p" "$U"; }

# expand NAME|@GROUP...: the system call names, one a line (systemd's tables)
expand() {
	for t in "$@"; do
		case $t in
		@*)
			g=$(systemd-analyze syscall-filter "$t" 2>/dev/null) || { echo "!unknown group $t"; continue; }
			# shellcheck disable=SC2046
			expand $(echo "$g" | sed '1d; /^ *#/d; /^ *$/d') ;;
		*) echo "$t" ;;
		esac
	done
}

# ---- 1. the list against the filter
filt=$(unit_val SystemCallFilter)
[ -n "$filt" ] || fail "the unit has no SystemCallFilter="
case $filt in *"~"*) fail "SystemCallFilter=$filt: this test reads allow lists only" ;; esac
# shellcheck disable=SC2086
expand $filt | sort -u > "$TMP/allow"
grep '^!' "$TMP/allow" && fail "SystemCallFilter= names a group systemd-analyze does not know"
grep -v '^#' "$LIST" | sed '/^ *$/d' | sort -u > "$TMP/list"
[ -s "$TMP/list" ] || fail "$LIST lists nothing"
missing=$(comm -23 "$TMP/list" "$TMP/allow" | tr '\n' ' ')
[ -z "$missing" ] || fail "the daemon calls what SystemCallFilter= kills: $missing"
# the check sees a call outside the filter (it is not vacuous)
[ "$(echo ptrace | comm -23 - "$TMP/allow")" = ptrace ] || fail "ptrace is allowed?"
echo "$(wc -l < "$TMP/list") listed calls, all within SystemCallFilter= ($(wc -l < "$TMP/allow") calls)"

denied() { # SETTING NAME...: none of NAMES may be in the list
	what=$1
	shift
	hit=$(expand "$@" | sort -u | comm -12 - "$TMP/list" | tr '\n' ' ')
	[ -z "$hit" ] || fail "$what=yes denies what the daemon calls: $hit"
}
[ "$(unit_val ProtectClock)" = yes ] && denied ProtectClock @clock
[ "$(unit_val ProtectHostname)" = yes ] && denied ProtectHostname sethostname setdomainname
[ "$(unit_val RestrictNamespaces)" = yes ] && denied RestrictNamespaces unshare setns
[ "$(unit_val SystemCallArchitectures)" = native ] || fail "SystemCallArchitectures= is not native"

# ---- 2. the daemon in the sandbox
caps=$(unit_val CapabilityBoundingSet)
[ -n "$caps" ] || fail "the unit has no CapabilityBoundingSet="
bset=-all
for c in $caps; do bset="$bset,+$(echo "${c#CAP_}" | tr A-Z a-z)"; done
um=$(unit_val UMask)
[ -n "$um" ] || um=0022
ns= mdwe=
[ "$(unit_val RestrictNamespaces)" = yes ] && ns=-n
[ "$(unit_val MemoryDenyWriteExecute)" = yes ] && mdwe=-w
netns=
if [ "$(unit_val PrivateNetwork)" = yes ]; then
	netns="unshare -n"
	# newer systemd makes a mount namespace for PrivateNetwork= unless
	# told not to, and the FUSE mount would not be seen outside it
	[ "$(unit_val PrivateMounts)" = no ] || fail "PrivateNetwork=yes without PrivateMounts=no"
fi
[ "$(unit_val NoNewPrivileges)" = yes ] || fail "NoNewPrivileges= is not yes"

# sandboxed ALLOWLIST BSET: a program that runs nvmefsd as the unit would
sandboxed() {
	w=$TMP/sandboxed.$(basename "$1").$(echo "$2" | tr -c 'a-z0-9\n' _)
	cat > "$w" <<EOF
#!/bin/sh
exec $netns setpriv --bounding-set=$2 --inh-caps=-all sh -c 'umask $um; exec "\$@"' sh \\
	"$ROOT/scripts/seccomp-exec" $ns $mdwe "$1" "$BUILD/nvmefsd" "\$@"
EOF
	chmod 755 "$w"
	echo "$w"
}

# a mountpoint two directories down, neither there yet: the daemon makes them
MNT=$TMP/deep/mnt
FILE_MODE=0664 FILE_GROUP=65534 IO_TIMEOUT=400
# the socket's group and mode come from admin_group
DAEMON_EXTRA="admin_group = 65534"
conf_write <<EOF
[controller nvme0]
device = sim
namespaces = 1
size = 16M
block_size = 4096
backing = ram
exec = thread
EOF

# sd_notify's socket, as systemd would pass it
python3 - "$TMP/notify" "$TMP/notify.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode(errors="replace").replace("\n", " ") + "\n")
PY
NPID=$!
trap 'kill $NPID 2>/dev/null; lib_cleanup' EXIT
i=0
while [ ! -S "$TMP/notify" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$TMP/notify" ] || fail "no notify socket"
export NOTIFY_SOCKET=$TMP/notify

wait_ready() {
	i=0
	while [ $i -lt 50 ]; do
		grep -q 'READY=1' "$TMP/notify.log" 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

resets_ok() {
	"$C" -s "$TMP/admin.sock" --json stats |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["controllers"][0]["recovery"]["resets_ok"])'
}

serve_checks() { # what a client sees of a daemon that is up
	label=$1
	fuse_mounted || fail "$label: no FUSE mount on $MNT seen from here"
	wait_ready || fail "$label: no READY=1 on NOTIFY_SOCKET"
	dd if=/dev/urandom of="$TMP/pat" bs=4k count=64 2>/dev/null
	dd if="$TMP/pat" of="$MNT/nvme0n1" bs=4k conv=notrunc,fsync oflag=direct 2>/dev/null ||
		fail "$label: write"
	dd if="$MNT/nvme0n1" of="$TMP/back" bs=4k count=64 iflag=direct 2>/dev/null ||
		fail "$label: read"
	cmp -s "$TMP/pat" "$TMP/back" || fail "$label: read back differs from what was written"
	for q in status stats queues namespaces "identify nvme0"; do
		# shellcheck disable=SC2086
		"$C" -s "$TMP/admin.sock" $q > "$TMP/ctl" 2>&1 ||
			fail "$label: nvmefsctl $q: $(head -3 "$TMP/ctl")"
	done
	# a controller fatal status: the recovery thread resets it, I/O resumes
	"$C" -s "$TMP/admin.sock" inject nvme0 cfs > /dev/null || fail "$label: inject cfs"
	i=0
	while [ $i -lt 100 ]; do
		[ "$(resets_ok)" -ge 1 ] 2>/dev/null &&
			dd if="$MNT/nvme0n1" of="$TMP/back" bs=4k count=64 iflag=direct 2>/dev/null &&
			cmp -s "$TMP/pat" "$TMP/back" && break
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 100 ] || fail "$label: no reset and good read within 10 s of a CFS (resets_ok $(resets_ok))"
}

# a plain run first (traced under NVMEFS_STRACE_DIR, and the only run that
# can be: strace is no part of the sandbox; it brings sd_notify's calls)
: > "$TMP/notify.log"
daemon_start nvme0n1 || fail "plain start"
serve_checks plain
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "plain: exit status $DAEMON_RC"
rm -rf "$TMP/deep"

D_PLAIN=$D
D=$(sandboxed "$TMP/allow" "$bset")
: > "$TMP/notify.log"
if daemon_start nvme0n1; then
	st=/proc/$DPID/status
	grep -q '^Seccomp:[[:space:]]*2' $st || fail "sandbox: no seccomp filter on the daemon"
	grep -q '^NoNewPrivs:[[:space:]]*1' $st || fail "sandbox: no no_new_privs"
	want=$(setpriv --bounding-set="$bset" grep '^CapBnd' /proc/self/status)
	[ "$(grep '^CapBnd' $st)" = "$want" ] || fail "sandbox: $(grep '^CapBnd' $st), want $want"
	if [ -n "$netns" ]; then
		[ "$(readlink /proc/$DPID/ns/net)" != "$(readlink /proc/self/ns/net)" ] ||
			fail "sandbox: the daemon is in this network namespace"
	fi
	serve_checks sandbox
	# modes set by the daemon, not left to the umask
	[ "$(stat -c '%a %g' "$TMP/admin.sock")" = "660 65534" ] ||
		fail "admin socket: $(stat -c '%a %g' "$TMP/admin.sock"), want 660 65534"
	[ "$(stat -c %a "$MNT/nvme0n1")" = 664 ] || fail "namespace file mode $(stat -c %a "$MNT/nvme0n1"), want 664"
	[ "$(stat -c %a "$TMP/deep")" = 755 ] ||
		fail "$TMP/deep, made by the daemon under umask $um: mode $(stat -c %a "$TMP/deep"), want 755"
	setpriv --reuid=65534 --regid=65534 --clear-groups dd if="$MNT/nvme0n1" of=/dev/null bs=4k count=1 \
		2>"$TMP/nobody" || fail "uid 65534 cannot read $MNT/nvme0n1: $(cat "$TMP/nobody")"
	rwx=$(awk '$2 ~ /w/ && $2 ~ /x/' /proc/$DPID/maps)
	[ -z "$rwx" ] || fail "writable and executable mappings: $rwx"
	echo "sandboxed daemon served: $(grep -E '^(CapBnd|Seccomp|NoNewPrivs)' $st | tr -s '\t\n' '  ')"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "sandbox: exit status $DAEMON_RC after SIGTERM"
	fuse_mounted && fail "sandbox: still mounted after the stop"
else
	fail "sandbox: the daemon did not start (exit ${DAEMON_RC:-?})"
fi

# ---- 3. controls: the sandbox bites
grep -vx -e mount -e umount2 "$TMP/allow" > "$TMP/allow-nomount"
D=$(sandboxed "$TMP/allow-nomount" "$bset")
if daemon_start nvme0n1 > "$TMP/ctl1" 2>&1; then
	fail "without mount(2) in the filter the daemon mounted"
	daemon_stop
elif [ "$DAEMON_RC" != 159 ]; then
	fail "without mount(2) in the filter: exit ${DAEMON_RC:-?}, want 159 (SIGSYS)"
else
	echo "without mount(2) in the filter: killed by SIGSYS"
fi
umount -l "$MNT" 2>/dev/null
D=$(sandboxed "$TMP/allow" "$(echo "$bset" | sed 's/,+sys_admin//')")
if daemon_start nvme0n1 > "$TMP/ctl2" 2>&1; then
	fail "without CAP_SYS_ADMIN the daemon mounted"
	daemon_stop
else
	echo "without CAP_SYS_ADMIN: no mount (exit ${DAEMON_RC:-?})"
fi
D=$D_PLAIN
finish
