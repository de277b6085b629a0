#!/bin/bash
# parallel-dio.sh - synchronous direct writers sharing one file: what
# FOPEN_PARALLEL_DIRECT_WRITES in the open answer is worth.  Without it the
# kernel takes the file's inode lock for every direct write, so N writers
# issue one write at a time; with it they reach the daemon together.
#
# Usage: bench/parallel-dio.sh BEFORE AFTER [-o FILE]
#   BEFORE, AFTER  two nvmefsd binaries, e.g. one built from a commit that did
#                  not set the flag (git worktree add /tmp/old REV && make -C
#                  /tmp/old build/nvmefsd) and this tree's build/nvmefsd
#   -o FILE        also write the report to FILE
# Environment: RUNTIME (8 s per job after RAMP 2 s), ROUNDS (3), JOBS (4).
# Both daemons run the same config (no fuse_transport key, which older
# daemons do not know) with FUSE over io_uring switched off for the run, so
# both serve over /dev/fuse; the switch is put back at the end.  Rounds
# alternate the order; the table gives medians and AFTER/BEFORE.
set -u

RUNTIME=${RUNTIME:-8}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-4}
SW=/sys/module/fuse/parameters/enable_uring

[ $# -ge 2 ] || { sed -n '/^# Usage:/,/^# Environment/p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BEFORE=$1 AFTER=$2
shift 2
OUT=
[ "${1:-}" = -o ] && OUT=${2:?-o needs a file}
for b in "$BEFORE" "$AFTER"; do
	[ -x "$b" ] || { echo "parallel-dio: $b is not an executable" >&2; exit 2; }
done
command -v fio >/dev/null || { echo "parallel-dio: needs fio" >&2; exit 2; }

WORK=$(mktemp -d /tmp/parallel-dio.XXXXXX)
MNT=$WORK/mnt
DPID=
OLDSW=
cleanup() {
	[ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
	umount -l "$MNT" 2>/dev/null
	[ -n "$OLDSW" ] && echo "$OLDSW" > $SW
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if [ -w $SW ]; then
	OLDSW=$(cat $SW)
	echo N > $SW
fi
mkdir -p "$MNT"
cat > "$WORK/conf" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $WORK/admin.sock
log_level = warn
[engine]
queues = $(nproc)
mode = hybrid
[controller nvme0]
device = sim
size = 1G
block_size = 4096
backing = ram
exec = inline
EOF

# one round of one binary: prints "IOPS_N IOPS_1"
measure() {
	local bin=$1 i=0 out=
	"$bin" -f -c "$WORK/conf" > "$WORK/log" 2>&1 &
	DPID=$!
	while [ ! -f "$MNT/nvme0n1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -f "$MNT/nvme0n1" ] || { cat "$WORK/log" >&2; return 1; }
	# first-touch page faults of the RAM namespace are not the daemon's
	dd if=/dev/zero of="$MNT/nvme0n1" bs=1M count=1024 oflag=direct conv=notrunc status=none
	for nj in "$JOBS" 1; do
		fio --name=w --filename="$MNT/nvme0n1" --ioengine=psync --direct=1 --rw=randwrite \
			--bs=4k --numjobs="$nj" --group_reporting --time_based --runtime="$RUNTIME" \
			--ramp_time="$RAMP" --output-format=json --output="$WORK/fio.json" > /dev/null ||
			return 1
		out="$out $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["write"]["iops"]))' "$WORK/fio.json")"
	done
	kill -TERM "$DPID"; wait "$DPID"; DPID=
	echo $out
}

: > "$WORK/res"
for r in $(seq 1 "$ROUNDS"); do
	order="before after"
	[ $((r % 2)) = 0 ] && order="after before"
	for w in $order; do
		bin=$BEFORE
		[ $w = after ] && bin=$AFTER
		res=$(measure "$bin") || { echo "parallel-dio: $w: run failed" >&2; exit 1; }
		echo "round $r: $w: $res" >&2
		echo "$w $res" >> "$WORK/res"
	done
done
python3 - "$WORK/res" "$JOBS" "$RUNTIME" "$ROUNDS" "$BEFORE" "$AFTER" > "$WORK/report" <<'EOF'
import statistics, sys
res, jobs, runtime, rounds, before, after = sys.argv[1:]
d = {"before": [], "after": []}
for line in open(res):
    w, a, b = line.split()
    d[w].append((int(a), int(b)))
med = {w: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for w, v in d.items()}
print(f"fio psync randwrite 4K direct, {runtime} s per job, {rounds} rounds (medians), /dev/fuse")
print(f"before: {before}\nafter:  {after}\n")
print(f"| writers | before IOPS | after IOPS | after / before |")
print(f"|---:|---:|---:|---:|")
for i, n in enumerate((jobs, "1")):
    b, a = med["before"][i], med["after"][i]
    print(f"| {n} | {b:.0f} | {a:.0f} | {a / b:.2f} |")
EOF
cat "$WORK/report"
[ -n "$OUT" ] && cp "$WORK/report" "$OUT"
exit 0
