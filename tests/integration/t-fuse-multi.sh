#!/bin/sh
# t-fuse-multi.sh - two controllers with two namespaces each, one with 512 B
# blocks: four files of the right sizes, each keeps its own data (no
# cross-talk between namespaces or controllers).
. "$(dirname "$0")/lib.sh"
lib_init
NCPU=$(getconf _NPROCESSORS_ONLN)
if [ "$NCPU" -ge 2 ]; then QUEUES=2 CPUS=0,1; else QUEUES=1 CPUS=0; fi
export QUEUES CPUS
conf_sim nvme0 12M namespaces=2 block_size=4096 backing=ram \
	-- nvme1 6M namespaces=2 block_size=512 backing=ram exec=thread
daemon_start nvme0n1 nvme0n2 nvme1n1 nvme1n2 || { fail "start"; finish; }
[ "$(ls "$MNT" | tr '\n' ' ')" = "nvme0n1 nvme0n2 nvme1n1 nvme1n2 " ] || fail "listing: $(ls "$MNT")"
for n in nvme0n1:12 nvme0n2:12 nvme1n1:6 nvme1n2:6; do
	f=${n%:*} s=${n#*:}
	[ "$(stat -c %s "$MNT/$f")" = $((s << 20)) ] || fail "$f: size $(stat -c %s "$MNT/$f")"
	head -c $((s << 20)) /dev/urandom > "$TMP/$f"
done
for f in nvme0n1 nvme0n2 nvme1n1 nvme1n2; do
	dd if="$TMP/$f" of="$MNT/$f" bs=256k oflag=direct conv=notrunc status=none &
	PIDS="${PIDS:-} $!"
done
for p in $PIDS; do wait "$p" || fail "dd $p"; done
for f in nvme0n1 nvme0n2 nvme1n1 nvme1n2; do
	cmp "$TMP/$f" "$MNT/$f" || fail "$f: data differs"
done
# 512 B namespace: a 512-byte aligned O_DIRECT-sized write lands alone
python3 - "$MNT/nvme1n1" <<'PY' || fail "512 B block write"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
old = os.pread(fd, 1536, 512 * 100)
os.pwrite(fd, b"\x5a" * 512, 512 * 101)
new = os.pread(fd, 1536, 512 * 100)
ok = new[:512] == old[:512] and new[512:1024] == b"\x5a" * 512 and new[1024:] == old[1024:]
sys.exit(0 if ok else 1)
PY
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
