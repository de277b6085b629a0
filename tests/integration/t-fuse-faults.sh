#!/bin/sh
# t-fuse-faults.sh - errors of the device reach the caller of read(2) and
# write(2) as errno and never hang it: media errors on read, write and a
# read-modify-write give EIO, a lost completion gives EIO after the engine's
# timeout and the namespace keeps working (tests/helpers/fuse-faults.c, the
# daemon's stack in one process with the controller's fault injection).
. "$(dirname "$0")/lib.sh"
lib_init
helper_run fuse-faults 60
finish
