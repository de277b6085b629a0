#!/bin/sh
# t-vfio-bind-script.sh - scripts/vfio-bind against a fake sysfs and /dev
# (VFIO_BIND_TEST=1): the name of a process holding the disk is printed
# with its terminal escapes as \xNN; VFIO_BIND_SYSFS is ignored (with a
# warning) without VFIO_BIND_TEST=1; a PCI function whose class is not NVMe
# is refused, naming the class, unless --force; --config takes the addresses
# of nvmefs.conf's controllers.  Binding itself needs a real
# device: tests/vm/t-vfio-bind.sh covers it.
# transport-independent: scripts/vfio-bind on a fake sysfs; nvmefsd does not run
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
VB=$ROOT/scripts/vfio-bind
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
TMP=$(mktemp -d)
HOLDER=
cleanup() {
	[ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

S=$TMP/sys
NVME=0000:fe:1f.6 # a domain-0 address no real machine here has
OTHER=0000:fe:1f.7

# fake_dev BDF CLASS GROUP [NAMESPACE]
fake_dev() {
	d=$S/bus/pci/devices/$1
	mkdir -p "$d" "$S/kernel/iommu_groups/$3/devices"
	echo "$2" > "$d/class"
	: > "$d/driver_override"
	ln -s "../../../kernel/iommu_groups/$3" "$d/iommu_group"
	ln -s "../../../../bus/pci/devices/$1" "$S/kernel/iommu_groups/$3/devices/$1"
	if [ -n "${4:-}" ]; then
		mkdir -p "$d/nvme/nvme9/$4" "$S/class/block/$4/holders"
	fi
}
fake_dev $NVME 0x010802 91 nvme9n1
fake_dev $OTHER 0x0c0330 92
mkdir -p "$TMP/dev"
: > "$TMP/dev/nvme9n1"

vb() { # run vfio-bind on the fake tree: out, err, rc
	VFIO_BIND_TEST=1 VFIO_BIND_SYSFS=$S VFIO_BIND_DEV=$TMP/dev sh "$VB" "$@" \
		> "$TMP/out" 2> "$TMP/err"
	rc=$?
}

vb --check $NVME
[ $rc = 0 ] && grep -q "^$NVME: can be bound to vfio-pci$" "$TMP/out" ||
	fail "a free NVMe function: rc $rc, $(cat "$TMP/out" "$TMP/err")"

# a process named with terminal escapes (its name is that of the file it
# was run as) holds the namespace open
ESC=$(printf '\033')
BEL=$(printf '\007')
NAME="x${ESC}[2J${BEL}\\y"
ln -s "$(command -v sleep)" "$TMP/$NAME"
"$TMP/$NAME" 30 < "$TMP/dev/nvme9n1" &
HOLDER=$!
i=0
while [ "$(readlink "/proc/$HOLDER/fd/0")" != "$TMP/dev/nvme9n1" ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
vb --check $NVME
[ $rc = 1 ] || fail "held namespace: rc $rc, want 1"
want="$NVME: /dev/nvme9n1 is open by $HOLDER (x\\x1b[2J\\x07\\x5cy)"
grep -qF "vfio-bind: $want" "$TMP/err" || fail "held namespace: no line '$want' in: $(cat -v "$TMP/err")"
grep -q "$ESC" "$TMP/err" "$TMP/out" && fail "an escape byte reached the output: $(cat -v "$TMP/err")"
grep -q "$BEL" "$TMP/err" "$TMP/out" && fail "a BEL byte reached the output"
echo "held: $(grep 'open by' "$TMP/err")"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
HOLDER=

# the class check
vb --check $OTHER
[ $rc = 1 ] || fail "non-NVMe --check: rc $rc, want 1"
grep -qF "vfio-bind: $OTHER: PCI class 0x0c0330, not an NVMe controller (0x010802): not bound (--force binds it anyway)" \
	"$TMP/err" || fail "non-NVMe --check: message: $(cat "$TMP/err")"
echo "class: $(cat "$TMP/err")"
vb $OTHER
[ $rc = 1 ] || fail "non-NVMe bind: rc $rc, want 1"
grep -q "not an NVMe controller" "$TMP/err" || fail "non-NVMe bind: message: $(cat "$TMP/err")"
[ -s "$S/bus/pci/devices/$OTHER/driver_override" ] && fail "non-NVMe bind: driver_override written"
vb --check --force $OTHER
[ $rc = 0 ] && grep -q "^$OTHER: can be bound to vfio-pci$" "$TMP/out" ||
	fail "non-NVMe --check --force: rc $rc, $(cat "$TMP/out" "$TMP/err")"
vb --force --check $NVME $OTHER
[ $rc = 0 ] || fail "--force before --check, two functions: rc $rc, $(cat "$TMP/err")"
vb --bogus $NVME
[ $rc = 2 ] || fail "unknown option: rc $rc, want 2"

# --config: the PCI addresses of nvmefs.conf's [controller NAME] sections
# (what the nvmefs-vfio-bind unit runs at boot): sim, commented lines and
# other sections' keys do not count, blanks around names and values do not
# matter, a domain-0 short address is taken; none is nothing to do
cat > "$TMP/c.conf" <<EOC
[daemon]
mountpoint = /run/nvmefs
# [controller gone]
#device = 0000:fe:00.0
[controller a]
device = sim
[ controller b ]
  device =  ${NVME#0000:}${TAB:-	}
[engine]
queues = 1
[controller c]
device=$OTHER
EOC
vb --check --force --config "$TMP/c.conf"
[ $rc = 0 ] || fail "--config: rc $rc, $(cat "$TMP/err")"
[ "$(cat "$TMP/out")" = "$NVME: can be bound to vfio-pci
$OTHER: can be bound to vfio-pci" ] || fail "--config: not the config's two controllers: $(cat "$TMP/out")"
printf '[daemon]\nallow_no_controller = yes\n[controller s]\ndevice = sim\n' > "$TMP/n.conf"
vb --config "$TMP/n.conf"
[ $rc = 0 ] && grep -q "names no PCI controller: nothing to do" "$TMP/out" ||
	fail "--config without a PCI controller: rc $rc, $(cat "$TMP/out" "$TMP/err")"
vb --config "$TMP/c.conf" $NVME
[ $rc = 2 ] || fail "--config with an address as well: rc $rc, want 2"
vb --config "$TMP/none.conf"
[ $rc = 1 ] || fail "--config of a missing file: rc $rc, want 1"
echo "config: $(cat "$TMP/err" | tr '\n' ' ')"

# without VFIO_BIND_TEST=1 the fake tree is ignored: the real /sys has no
# such function
VFIO_BIND_SYSFS=$S VFIO_BIND_DEV=$TMP/dev sh "$VB" --check $NVME > "$TMP/out" 2> "$TMP/err"
rc=$?
[ $rc = 1 ] || fail "VFIO_BIND_SYSFS alone: rc $rc, want 1 ($(cat "$TMP/out"))"
grep -q "VFIO_BIND_SYSFS and VFIO_BIND_DEV are ignored" "$TMP/err" ||
	fail "VFIO_BIND_SYSFS alone: no warning: $(cat "$TMP/err")"
grep -q "$NVME: no such PCI device" "$TMP/err" ||
	fail "VFIO_BIND_SYSFS alone: the fake tree was used: $(cat "$TMP/out" "$TMP/err")"
echo "no test flag: $(cat "$TMP/err" | tr '\n' ' ')"

if [ $FAILS -gt 0 ]; then
	echo "$FAILS failure(s)"
	exit 1
fi
echo "all checks passed"
