#!/bin/sh
# t-recipes.sh - the recipes of docs/operations.md, section 11, as given
# there.
#
# QEMU: the -drive/-device lines of the recipe start a QEMU whose guest
# never runs (-S); its monitor's qemu-io command drives that drive through
# the block layer with exactly those options: the image is open O_DIRECT
# (cache=none) and served by Linux AIO (aio=native: QEMU maps an [aio]
# ring), a pattern written there reads back through the file with dd, one
# written with dd reads back in QEMU, a flush reaches the device, a discard
# punches the range (zeros after), the device has 4 KiB blocks, and a second
# QEMU writer is refused by QEMU's image lock.  The stand-alone check line
# (qemu-io -t none -i native, and -i io_uring) writes and reads back too;
# -t directsync flushes after a write; -i native without -t none is refused.
# Loop: losetup --direct-io=on --sector-size 4096 gives DIO 1 and 4 KiB
# sectors; direct writes through the loop device read back through the file
# and cost no read-modify-write in the daemon; with 512-byte sectors DIO is
# on too but a 512-byte write costs one; detached, it is gone.
# The hugepage sizing of the section is t-hugepages.sh's (it wants the
# machine's hugepages to itself).  Parts whose tool is missing
# (qemu-system-x86_64) are skipped with a message.
. "$(dirname "$0")/lib.sh"
lib_init
command -v qemu-io >/dev/null || { fail "no qemu-io (scripts/deps.sh test installs qemu-utils)"; finish; }
command -v losetup >/dev/null || skip "no losetup"
NS=$((64 << 20))
conf_sim nvme0 64M namespaces=1 block_size=4096 backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
F=$MNT/nvme0n1
LOOP=
cleanup() {
	[ -s "$TMP/qemu.pid" ] && kill -9 "$(cat "$TMP/qemu.pid")" 2>/dev/null
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
	lib_cleanup
}
trap cleanup EXIT
# fuse counters (stats --json "fuse"): rmw_writes, flushes_sent, punches
fstat() {
	ctl --json stats | python3 -c '
import json, sys
f = json.load(sys.stdin)["fuse"]
k = sys.argv[1]
print(f["ops"]["punch"]["count"] if k == "punches" else f[k])' "$1"
}
# pat FILE BYTE MIB: MIB MiB of BYTE (two hex digits)
pat() { head -c $(($3 << 20)) /dev/zero | tr '\0' "\\$(printf '%03o' "0x$2")" > "$1"; }
# through_file OFF_MIB MIB: that range of the namespace file, O_DIRECT
through_file() { dd if="$F" bs=1M skip="$1" count="$2" iflag=direct status=none; }

# ---- QEMU: the recipe's drive, driven through its monitor ----
if command -v qemu-system-x86_64 >/dev/null; then
	pat "$TMP/p5a" 5a 2
	pat "$TMP/pc3" c3 1
	dd if="$TMP/pc3" of="$F" bs=1M seek=8 oflag=direct conv=notrunc status=none || fail "dd 0xc3"
	FL0=$(fstat flushes_sent)
	P0=$(fstat punches)
	python3 - "$F" "$TMP" > "$TMP/qemu.out" 2>&1 <<'PY'
import json, os, socket, subprocess, sys, time
f, tmp = sys.argv[1], sys.argv[2]
sock = tmp + "/qmp.sock"
q = subprocess.Popen(["qemu-system-x86_64", "-S", "-M", "q35", "-accel", "tcg", "-nodefaults",
    "-display", "none", "-qmp", "unix:%s,server=on,wait=off" % sock,
    "-drive", "file=%s,if=none,id=d0,format=raw,cache=none,aio=native,discard=unmap" % f,
    "-device", "virtio-blk-pci,drive=d0,logical_block_size=4096,physical_block_size=4096"],
    stdin=subprocess.DEVNULL, stdout=open(tmp + "/qemu.stdout", "w"), stderr=subprocess.STDOUT)
open(tmp + "/qemu.pid", "w").write(str(q.pid))
for _ in range(100):
    if os.path.exists(sock):
        break
    time.sleep(0.1)
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
s.settimeout(30)
rd = s.makefile("r")
def qmp(cmd, **args):
    s.sendall(json.dumps({"execute": cmd, "arguments": args}).encode() + b"\n")
    while True:
        m = json.loads(rd.readline())
        if "event" not in m:
            return m
json.loads(rd.readline())  # the greeting
qmp("qmp_capabilities")
# the monitor's commands through QMP: info's text comes back whole; what
# qemu-io prints goes to QEMU's stdout, read once QEMU has quit
def hmp(cmd, show=True):
    out = qmp("human-monitor-command", **{"command-line": cmd}).get("return", "")
    print("(qemu) " + cmd)
    if show:
        print(out.rstrip())
    return out
bad = 0
def check(ok, what):
    global bad
    print(("ok: " if ok else "FAIL: ") + what)
    bad += not ok
out = hmp("info block")
check("Cache mode:       writeback, direct" in out, "cache=none: the image is open with O_DIRECT")
fds = [d for d in os.listdir("/proc/%d/fd" % q.pid)
       if os.readlink("/proc/%d/fd/%s" % (q.pid, d)) == f]
flags = [int(open("/proc/%d/fdinfo/%s" % (q.pid, d)).read().split("flags:")[1].split()[0], 8) for d in fds]
check(flags and all(x & os.O_DIRECT for x in flags), "QEMU's fds of the file have O_DIRECT: %s" % [oct(x) for x in flags])
hmp('qemu-io d0 "write -P 0x5a 1M 2M"')
check("[aio]" in open("/proc/%d/maps" % q.pid).read(), "aio=native: QEMU uses a Linux AIO context")
hmp('qemu-io d0 "read -P 0xc3 8M 1M"')
hmp('qemu-io d0 "flush"')
hmp('qemu-io d0 "discard 16M 1M"')
hmp('qemu-io d0 "read -P 0 16M 1M"')
out = hmp("info qtree", False)
out = out[out.find("dev: virtio-blk-device"):]
print("\n".join(l for l in out.split("\n") if "block_size" in l))
check("logical_block_size = 4096" in out and "physical_block_size = 4096" in out,
      "the guest's disk has 4 KiB blocks")
# a second writer while this QEMU has the image open: refused by the lock
r = subprocess.run(["qemu-io", "-f", "raw", "-t", "none", "-i", "native", "-c", "write 0 4k", f],
                   capture_output=True, text=True)
print(r.stdout + r.stderr)
check(r.returncode != 0 and 'Failed to get "write" lock' in r.stderr, "a second writer is refused")
qmp("quit")
try:
    q.wait(20)
except subprocess.TimeoutExpired:
    q.kill()
    check(False, "QEMU did not quit")
out = open(tmp + "/qemu.stdout").read()
print(out)
lines = [l for l in out.split("\n") if l.startswith(("wrote", "read", "discard"))]
check(lines == ["wrote 2097152/2097152 bytes at offset 1048576",
                "read 1048576/1048576 bytes at offset 8388608",
                "discard 1048576/1048576 bytes at offset 16777216",
                "read 1048576/1048576 bytes at offset 16777216"],
      "qemu-io in QEMU: the write, the read of what dd wrote, the discard, zeros after it")
check("verification failed" not in out and "error" not in out.lower(), "no verification failure, no error")
sys.exit(1 if bad else 0)
PY
	rc=$?
	rm -f "$TMP/qemu.pid"
	cat "$TMP/qemu.out"
	[ $rc = 0 ] || fail "QEMU recipe (see above)"
	through_file 1 2 | cmp -s - "$TMP/p5a" || fail "what QEMU wrote does not read back through the file"
	[ "$(fstat flushes_sent)" -gt "$FL0" ] || fail "QEMU's flush did not reach the device"
	[ "$(fstat punches)" -gt "$P0" ] || fail "QEMU's discard did not punch"
	through_file 16 1 | cmp -s -n $((1 << 20)) - /dev/zero ||
		fail "the discarded range does not read as zeros through the file"
else
	echo "SKIP part: no qemu-system-x86_64 (scripts/deps.sh vm installs it): the QEMU drive line is not checked"
fi

# the stand-alone check line of the recipe, with aio=native and io_uring
for aio in native io_uring; do
	b=$([ $aio = native ] && echo 6e || echo 9d)
	pat "$TMP/p$b" $b 1
	qemu-io -f raw -t none -i $aio -c "write -P 0x$b 24M 1M" -c "read -P 0x$b 24M 1M" "$F" \
		> "$TMP/qio.out" 2>&1 || { cat "$TMP/qio.out"; fail "qemu-io -i $aio"; }
	grep -q 'verification failed' "$TMP/qio.out" && { cat "$TMP/qio.out"; fail "qemu-io -i $aio: read back"; }
	through_file 24 1 | cmp -s - "$TMP/p$b" || fail "qemu-io -i $aio: the file does not hold its write"
done
# cache=directsync: QEMU makes each write durable with a flush after it
# (its writethrough), not with O_DSYNC
D0=$(fstat dsync_writes) FL0=$(fstat flushes_sent)
qemu-io -f raw -t directsync -i native -c "write -P 0x11 28M 64k" "$F" > "$TMP/qio.out" 2>&1 ||
	{ cat "$TMP/qio.out"; fail "qemu-io -t directsync"; }
[ "$(fstat flushes_sent)" -gt "$FL0" ] || fail "cache=directsync: a write was not followed by a flush"
[ "$(fstat dsync_writes)" = "$D0" ] || echo "note: cache=directsync made O_DSYNC writes (QEMU changed?)"
# aio=native without cache=none: QEMU refuses (Linux AIO needs O_DIRECT)
qemu-io -f raw -i native -c "read 0 4k" "$F" > "$TMP/qio.out" 2>&1 &&
	fail "qemu-io -i native without -t none was not refused"
grep -q 'aio=native was specified, but it requires cache.direct=on' "$TMP/qio.out" ||
	{ cat "$TMP/qio.out"; fail "aio=native without O_DIRECT: not the expected refusal"; }
echo "QEMU recipe checked"

# ---- loop device with direct I/O ----
head -c $((8 << 20)) /dev/urandom > "$TMP/r8"
LOOP=$(losetup --find --show --direct-io=on --sector-size 4096 "$F" 2> "$TMP/losetup.err") ||
	{ fail "losetup --direct-io=on --sector-size 4096: $(cat "$TMP/losetup.err")"; finish; }
set -- $(losetup --list --noheadings -O DIO,LOG-SEC "$LOOP")
[ "${1:-}" = 1 ] || fail "losetup --list: DIO ${1:-?} on $LOOP, want 1 (direct I/O fell back to buffered)"
[ "${2:-}" = 4096 ] || fail "losetup --list: LOG-SEC ${2:-?}, want 4096"
[ "$(blockdev --getsize64 "$LOOP")" = $NS ] || fail "$LOOP is not the namespace's size"
R0=$(fstat rmw_writes)
dd if="$TMP/r8" of="$LOOP" bs=1M seek=32 oflag=direct status=none || fail "dd to $LOOP"
dd if="$TMP/r8" of="$LOOP" bs=4k count=1 seek=$((40 * 256)) oflag=direct status=none || fail "4 KiB dd"
through_file 32 8 | cmp -s - "$TMP/r8" || fail "what went through $LOOP does not read back through the file"
[ "$(fstat rmw_writes)" = "$R0" ] || fail "whole-block writes through the loop device cost a read-modify-write"
losetup -d "$LOOP" || fail "losetup -d"
losetup --list --noheadings -O BACK-FILE | grep -qF "$F" && fail "still attached after losetup -d"
LOOP=
# 512-byte sectors: direct I/O as well, but a write of less than a block
# makes the daemon read the block first
LOOP=$(losetup --find --show --direct-io=on "$F") || { fail "losetup --direct-io=on"; finish; }
set -- $(losetup --list --noheadings -O DIO,LOG-SEC "$LOOP")
[ "${1:-}" = 1 ] && [ "${2:-}" = 512 ] || fail "512-byte sectors: DIO ${1:-?} LOG-SEC ${2:-?}, want 1 512"
R0=$(fstat rmw_writes)
head -c 512 /dev/urandom > "$TMP/r512"
dd if="$TMP/r512" of="$LOOP" bs=512 seek=$((48 << 11 | 1)) oflag=direct status=none || fail "512-byte dd"
dd if="$F" bs=512 skip=$((48 << 11 | 1)) count=1 status=none | cmp -s - "$TMP/r512" ||
	fail "the 512-byte write does not read back through the file"
[ "$(fstat rmw_writes)" -gt "$R0" ] || fail "a 512-byte write on a 4 KiB namespace made no read-modify-write"
losetup -d "$LOOP" || fail "losetup -d (512)"
LOOP=
echo "loop recipe checked"
daemon_stop_ok

finish
