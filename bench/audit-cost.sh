#!/bin/sh
# audit-cost.sh [ROUNDS] - what the audit build costs: nvmefsd and
# nvmefsd-audit served in turn, ROUNDS (3) rounds in one run, over the same
# config (software controller, 1 GiB RAM namespace, 2 reactors, /dev/fuse),
# each with 4 KiB randread and randwrite, QD 32 x 2 jobs, 5 s each; prints
# each round's IOPS and the median ratio audit/plain per job.  A ratio of
# two runs of one round: noisy on a busy machine, less so than absolutes.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ROUNDS=${1:-3}
[ "$(id -u)" = 0 ] || { echo "audit-cost: needs root (mounts FUSE)"; exit 2; }
for b in nvmefsd nvmefsd-audit; do
	[ -x "$BUILD/$b" ] || { echo "audit-cost: no $BUILD/$b (make)"; exit 2; }
done
TMP=$(mktemp -d /tmp/nvmefs-audit-cost.XXXXXX)
chmod 755 "$TMP"
DPID=
cleanup() {
	[ -n "$DPID" ] && kill -9 "$DPID" 2> /dev/null
	umount -l "$TMP/mnt" 2> /dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
cat > "$TMP/conf" <<EOF2
[daemon]
mountpoint = $TMP/mnt
admin_socket = $TMP/admin.sock
fuse_transport = ${FUSE_TRANSPORT:-classic}
[engine]
queues = 2
cpus = 0,1
mode = hybrid
[controller nvme0]
device = sim
size = 1G
block_size = 4096
backing = ram
EOF2
iops() { # JOB: IOPS of one 5 s fio job on the mount
	fio --name="$1" --filename="$TMP/mnt/nvme0n1" --ioengine=libaio --direct=1 --rw="$1" \
		--bs=4k --iodepth=32 --numjobs=2 --size=512M --offset_increment=512M --runtime=5 \
		--time_based --group_reporting --output-format=json 2> /dev/null |
		python3 -c 'import json, sys; j = json.load(sys.stdin)["jobs"][0]
print(int(j["read"]["iops"] + j["write"]["iops"]))'
}
: > "$TMP/res"
r=0
while [ $r -lt "$ROUNDS" ]; do
	r=$((r + 1))
	for b in nvmefsd nvmefsd-audit; do
		"$BUILD/$b" -f -c "$TMP/conf" > "$TMP/log" 2>&1 &
		DPID=$!
		i=0
		while [ ! -f "$TMP/mnt/nvme0n1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		# every block once, so that the audit compares rather than learns
		dd if=/dev/zero of="$TMP/mnt/nvme0n1" bs=1M count=1024 oflag=direct status=none
		for job in randread randwrite; do
			echo "$r $b $job $(iops $job)" | tee -a "$TMP/res"
		done
		kill -TERM "$DPID"
		wait "$DPID"
		DPID=
	done
done
python3 - "$TMP/res" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
for job in ("randread", "randwrite"):
    ratios = []
    for r in sorted({x[0] for x in rows}):
        v = {x[1]: int(x[3]) for x in rows if x[0] == r and x[2] == job}
        ratios.append(v["nvmefsd-audit"] / v["nvmefsd"])
    ratios.sort()
    print("%s: audit/plain IOPS per round %s, median %.2f" % (
        job, " ".join("%.2f" % x for x in ratios), ratios[len(ratios) // 2]))
PY
