#!/bin/sh
# t-fuse-faults.sh - errors of the device reach the caller of read(2) and
# write(2) as errno and never hang it: media errors on read, write and a
# read-modify-write give EIO, a lost completion gives EIO after the engine's
# timeout and the namespace keeps working (tests/helpers/fuse-faults.c, the
# daemon's stack in one process with the controller's fault injection).
. "$(dirname "$0")/lib.sh"
lib_init
H=$BUILD/tools/fuse-faults
[ -x "$H" ] || { echo "FAIL: no $H (make)"; exit 1; }
timeout 60 "$H" "$MNT"
rc=$?
[ $rc = 0 ] || fail "fuse-faults exited $rc"
fuse_mounted && fail "left mounted"
finish
