#!/bin/sh
# t-fuse-fio.sh - fio randrw with crc32c verify, block sizes 4K-128K, two jobs
# at queue depth 16 (libaio, O_DIRECT) for 20 s on a namespace served by the
# threaded software controller, two reactors: no error, no mismatch, and both
# reads and writes happened.
. "$(dirname "$0")/lib.sh"
lib_init
command -v fio >/dev/null || skip "no fio"
NCPU=$(getconf _NPROCESSORS_ONLN)
if [ "$NCPU" -ge 2 ]; then QUEUES=2 CPUS=0,1; else QUEUES=1 CPUS=0; fi
export QUEUES CPUS
QD=128 conf_sim nvme0 128M namespaces=1 block_size=4096 backing=ram exec=thread
daemon_start nvme0n1 || { fail "start"; finish; }
fio_verify "$MNT/nvme0n1" 20 64 2 16
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "daemon exited $DAEMON_RC"
finish
