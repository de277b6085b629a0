#!/bin/sh
# t-powerfail-large.sh - t-powerfail-cycles.sh with large writes: each
# durable write is 1 MiB (CRASH_WRITER_BS: two commands of 512 KiB, one
# doorbell), the unsynced writer writes 256 KiB at iodepth 8, and the
# software controller runs inline with two reactors and offload = 128K, so
# that the first command of each durable write goes through the
# controller's copy thread.  Every write acknowledged as durable
# must survive the cut, each 4 KiB of it; a write in flight at the cut may
# land in part.
if [ "$(nproc)" -ge 2 ]; then
	QUEUES=2 CPUS=0-1
	export QUEUES CPUS
fi
FAULT_EXEC=inline FAULT_OFFLOAD=128K CRASH_WRITER_BS=1048576 POWERFAIL_BLOCKS=4
POWERFAIL_NOISE_BS=256k POWERFAIL_WANT_OFFLOAD=1
export FAULT_EXEC FAULT_OFFLOAD CRASH_WRITER_BS POWERFAIL_BLOCKS POWERFAIL_NOISE_BS POWERFAIL_WANT_OFFLOAD
exec sh "$(dirname "$0")/t-powerfail-cycles.sh"
