#!/bin/sh
# t-fuse-unaligned.sh - writes that start and end inside blocks are
# read-modify-writes that keep the neighbouring bytes: dd bs=1000 at odd
# seeks (conv=notrunc) into the namespace and into a model file give the same
# bytes; then many threads write interleaved 100-byte pieces of the same
# blocks at once (each piece its own value), on a 4 KiB and a 512 B
# namespace, and every piece reads back as written: overlapping
# read-modify-writes were serialised.
. "$(dirname "$0")/lib.sh"
lib_init
command -v python3 >/dev/null || skip "no python3"
MODE=hybrid conf_sim nvme0 4M namespaces=1 block_size=4096 backing=ram exec=thread \
	-- sd 4M namespaces=1 block_size=512 backing=ram exec=thread
daemon_start nvme0n1 sdn1 || { fail "start"; finish; }

for ns in nvme0n1 sdn1; do
	F=$MNT/$ns
	M=$TMP/model-$ns
	head -c $((4 << 20)) /dev/urandom > "$TMP/init"
	cp "$TMP/init" "$M"
	dd if="$TMP/init" of="$F" bs=1M conv=notrunc status=none || fail "$ns: initial fill"
	head -c 200000 /dev/urandom > "$TMP/pieces"
	for seek in 1 7 333 1001 4095 4096; do
		for t in "$F" "$M"; do
			dd if="$TMP/pieces" of="$t" bs=1000 seek=$seek count=17 skip=$((seek % 150)) \
				conv=notrunc status=none || fail "$ns: dd bs=1000 seek=$seek"
		done
	done
	# sizes that are not a multiple of anything, crossing block boundaries
	for spec in 4097:3 513:123 100000:9999 1:65536; do
		off=${spec%:*} len=${spec#*:}
		for t in "$F" "$M"; do
			dd if="$TMP/pieces" of="$t" bs=$len count=1 seek=$off oflag=seek_bytes \
				conv=notrunc status=none || fail "$ns: dd $len bytes at $off"
		done
	done
	cmp "$F" "$M" || fail "$ns: differs from the model after unaligned writes"

	python3 - "$F" <<'PY' || fail "$ns: concurrent unaligned writers"
import os, sys, threading
path = sys.argv[1]
fd = os.open(path, os.O_RDWR)
PIECE, N, THREADS = 100, 2000, 8   # 200000 bytes: 49 blocks of 4 KiB, 391 of 512 B
base = 12345                        # not aligned to anything
def val(i):
    return bytes([(i * 37 + 11) & 0xff]) * PIECE
def writer(t):
    # thread t writes pieces t, t+THREADS, ...: neighbours share blocks
    for i in range(t, N, THREADS):
        os.pwrite(fd, val(i), base + i * PIECE)
ts = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
for t in ts: t.start()
for t in ts: t.join()
data = os.pread(fd, N * PIECE, base)
bad = [i for i in range(N) if data[i * PIECE:(i + 1) * PIECE] != val(i)]
if bad:
    print("FAIL: %d of %d pieces lost, first at %d" % (len(bad), N, bad[0]))
    sys.exit(1)
print("concurrent pieces intact:", N)
PY
	# the kernel sends synchronous writers one at a time; AIO keeps
	# hundreds of overlapping read-modify-writes in flight together
	if [ -x "$BUILD/tools/fuse-aio-pieces" ]; then
		"$BUILD/tools/fuse-aio-pieces" "$F" 777 300 1024 || fail "$ns: concurrent AIO pieces"
	else
		fail "no $BUILD/tools/fuse-aio-pieces (make)"
	fi
done
kill -USR1 "$DPID"
sleep 0.3
line=$(grep "stats: fuse" "$LOG" | tail -n 1)
echo "$line"
w=$(echo "$line" | tr ' ' '\n' | sed -n 's/^lock_waits=//p')
[ "${w:-0}" -gt 0 ] || fail "no write ever waited for the range lock: not exercised"

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
