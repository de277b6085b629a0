#!/bin/sh
# t-detach.sh - nvmefsctl detach and attach of one controller while another
# serves.  Two software controllers on file-backed namespaces; fio randrw
# crc32c verify runs on nvme1's file the whole time while nvme0 is:
#   detached: its file leaves the mount (ls, lookup, nvmefsctl namespaces),
#     a handle open on it fails every request with EIO (read, write, fstat),
#     the controller is shut down (CC.SHN) and removed, both logged;
#   attached with --wait: the file is back, with the data written before
#     the detach, in the same inode; the handle opened before the detach
#     still fails (it is stale, close included), a new open works;
#   detached and attached again without --wait: while detached, status,
#     stats, list and the metrics say "detached" (not "removed"); the
#     reply is "attaching" at once and status reaches live.
# nvme1's fio verify ends without an error, and the daemon stops with 0.
. "$(dirname "$0")/fault-lib.sh"
fault_init
# 1 s: a detach needs no timeout, and a busy machine must not time a
# command out meanwhile (a reset then fails what it holds)
IO_TIMEOUT=1000 conf_sim nvme0 32M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread \
	-- nvme1 64M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread
daemon_start nvme0n1 nvme1n1 || { fail "start"; finish; }
A=$MNT/nvme0n1
F=$MNT/nvme1n1
ino0=$(stat -c %i "$A")

# what nvme0 holds before it goes, durable
head -c $((4 << 20)) /dev/urandom > "$TMP/before"
dd if="$TMP/before" of="$A" bs=1M seek=8 oflag=direct conv=notrunc,fsync status=none ||
	fail "write nvme0 before the detach"

ctl_state_of() { # NAME FIELD
	ctl status --json | json "[c.get('$2') for c in d['controllers'] if c['name'] == '$1'][0]"
}

fio_start 20
fio_running

# a handle open on nvme0's file across the detach and the attach
python3 - "$A" "$C" "$TMP/admin.sock" "$MNT" > "$TMP/handle" 2>&1 <<'PY'
import errno, os, subprocess, sys
path, ctl, sock, mnt = sys.argv[1:5]
def ctl_run(*a):
    r = subprocess.run([ctl, "-s", sock] + list(a), capture_output=True, text=True, timeout=120)
    print("ctl %s: rc %d: %s%s" % (" ".join(a), r.returncode, r.stdout.strip(), r.stderr.strip()))
    return r.returncode
def attempt(what, fn):
    try:
        fn()
        print("%s: ok" % what)
    except OSError as e:
        print("%s: %s" % (what, errno.errorcode.get(e.errno, e.errno)))
fd = os.open(path, os.O_RDWR)
attempt("read before", lambda: os.pread(fd, 4096, 8 << 20))
ctl_run("detach", "nvme0")
attempt("read detached", lambda: os.pread(fd, 4096, 8 << 20))
attempt("write detached", lambda: os.pwrite(fd, b"x" * 4096, 0))
attempt("fstat detached", lambda: os.fstat(fd))
attempt("open detached", lambda: os.close(os.open(path, os.O_RDONLY)))
print("listed detached: %s" % " ".join(sorted(os.listdir(mnt))))
ctl_run("attach", "--wait", "nvme0")
print("listed attached: %s" % " ".join(sorted(os.listdir(mnt))))
attempt("read stale", lambda: os.pread(fd, 4096, 8 << 20))
fd2 = os.open(path, os.O_RDONLY)
attempt("read new", lambda: os.pread(fd2, 4096, 8 << 20))
print("inode attached: %d" % os.fstat(fd2).st_ino)
os.close(fd2)
attempt("close stale", lambda: os.close(fd))
PY
cat "$TMP/handle"
h() { grep -q "^$1\$" "$TMP/handle" || fail "handle: want '$1'"; }
h "read before: ok"
h "ctl detach nvme0: rc 0: nvme0: detached, 1 file gone, detached"
h "read detached: EIO"
h "write detached: EIO"
h "fstat detached: EIO"
h "open detached: ENOENT"
h "listed detached: nvme1n1"
h "ctl attach --wait nvme0: rc 0: nvme0: attached, live"
h "listed attached: nvme0n1 nvme1n1"
h "read stale: EIO"
h "read new: ok"
h "inode attached: $ino0"
h "close stale: EIO"
grep -q "nvme0: removed (detached (nvmefsctl detach))" "$LOG" || fail "the detach is not logged"
# shut down in order (CC.SHN) before it was removed: the engine logs it
grep -q "nvme0: shut down (CC.SHN normal) in" "$LOG" || fail "the detach did not shut nvme0 down"
grep -q "nvme0: attached: 1 file back" "$LOG" || fail "the attach is not logged"

# the data written before the detach is there
timeout 30 dd if="$A" of="$TMP/back" bs=1M skip=8 count=4 iflag=direct status=none ||
	fail "read nvme0 after attach"
cmp -s "$TMP/before" "$TMP/back" || fail "nvme0's data differs after detach + attach"

# again, without --wait: the reply comes at once, status follows
ctl detach nvme0 > "$TMP/out" 2>&1 || fail "second detach: $(cat "$TMP/out")"
ctl detach nvme0 > "$TMP/out" 2>&1 && fail "detach of a detached controller succeeded"
grep -q "nvme0 is detached already" "$TMP/out" || fail "double detach: $(cat "$TMP/out")"
ctl namespaces | grep -q '^nvme0n1 ' && fail "namespaces shows nvme0n1 while detached"
ctl namespaces | grep -q '^nvme1n1 ' || fail "namespaces lacks nvme1n1"
[ -e "$A" ] && fail "nvme0n1 still in the mount after the second detach"
# a planned detach has its own state, never "removed" (a failure's): in
# status (text and JSON), stats, list and the metrics
[ "$(ctl_state_of nvme0 state)" = detached ] || fail "status --json: nvme0 is $(ctl_state_of nvme0 state)"
ctl status | grep -Eq '^nvme0 .* detached( |$)' || fail "status: $(ctl status | grep '^nvme0 ')"
ctl stats --json | json "[c['state'] for c in d['controllers'] if c['name'] == 'nvme0'][0]" |
	grep -qx detached || fail "stats --json: nvme0 not detached"
ctl list | grep -Eq '^nvme0 .* detached ' || fail "list: $(ctl list | grep '^nvme0 ')"
ctl metrics > "$TMP/prom" || fail "metrics"
grep -q '^nvmefs_controller_state{controller="nvme0",state="detached"} 1$' "$TMP/prom" &&
	grep -q '^nvmefs_controller_state{controller="nvme0",state="removed"} 0$' "$TMP/prom" ||
	fail "metrics: $(grep 'nvmefs_controller_state{controller="nvme0"' "$TMP/prom" | tr '\n' ' ')"
grep -q '^nvmefs_controller_state{controller="nvme1",state="live"} 1$' "$TMP/prom" ||
	fail "metrics: nvme1 not live"
t0=$(now_ms)
ctl attach nvme0 > "$TMP/out" 2>&1 || fail "attach: $(cat "$TMP/out")"
t1=$(now_ms)
grep -q "^nvme0: attaching$" "$TMP/out" || fail "attach reply: $(cat "$TMP/out")"
echo "measure: attach answered in $((t1 - t0)) ms"
i=0
while [ "$(ctl_state_of nvme0 attach)" != live ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(ctl_state_of nvme0 attach)" = live ] || fail "attach not live: $(ctl_state_of nvme0 attach)"
[ "$(ctl_state_of nvme0 state)" = live ] || fail "nvme0 not live after attach"
[ -f "$A" ] || fail "nvme0n1 not back after the second attach"
n=$(grep -c "nvme0: shut down (CC.SHN normal) in" "$LOG")
[ "$n" = 2 ] || fail "$n shutdowns of nvme0 logged for two detaches"
grep -q "nvme1: shut down" "$LOG" && fail "nvme1 was shut down"
timeout 30 dd if="$A" of="$TMP/back" bs=1M skip=8 count=4 iflag=direct status=none ||
	fail "read nvme0 after the second attach"
cmp -s "$TMP/before" "$TMP/back" || fail "nvme0's data differs after the second attach"
dd_cmp_a() {
	head -c $((1 << 20)) /dev/urandom > "$TMP/new"
	dd if="$TMP/new" of="$A" bs=1M seek=1 oflag=direct conv=notrunc status=none &&
		dd if="$A" of="$TMP/newback" bs=1M skip=1 count=1 iflag=direct status=none &&
		cmp -s "$TMP/new" "$TMP/newback"
}
dd_cmp_a || fail "write + read nvme0 after the attach"

# nvme1 was never touched
fio_wait
[ "$FIO_ERR" = 0 ] || fail "fio verify on nvme1: error $FIO_ERR"
[ "$(ctl_state_of nvme1 state)" = live ] || fail "nvme1 not live"

fault_stop
finish
