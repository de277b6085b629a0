#!/bin/sh
# t-fuse-modes.sh - every reactor mode (poll, interrupt, hybrid), over the
# inline and the threaded software controller: dd of 16 MiB in and back
# (buffered and O_DIRECT) and a short fio verify run.
. "$(dirname "$0")/lib.sh"
lib_init
command -v fio >/dev/null || skip "no fio"
head -c $((16 << 20)) /dev/urandom > "$TMP/data"
for combo in poll:inline interrupt:thread hybrid:thread interrupt:inline; do
	MODE=${combo%:*} EXEC=${combo#*:}
	export MODE
	conf_sim nvme0 64M namespaces=1 block_size=4096 backing=ram "exec=$EXEC"
	daemon_start nvme0n1 || { fail "$combo: start"; continue; }
	F=$MNT/nvme0n1
	dd if="$TMP/data" of="$F" bs=1M conv=notrunc status=none || fail "$combo: dd write"
	cmp -n $((16 << 20)) "$TMP/data" "$F" || fail "$combo: buffered read back"
	dd if="$F" of="$TMP/back" bs=128k count=128 iflag=direct status=none
	cmp "$TMP/data" "$TMP/back" || fail "$combo: direct read back"
	fio_verify "$F" 4 16 2 16 || fail "$combo: fio"
	daemon_stop
	[ "$DAEMON_RC" = 0 ] || fail "$combo: daemon exited $DAEMON_RC"
	echo "mode $combo done"
done
finish
