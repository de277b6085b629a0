#!/bin/sh
# kernel-vs-nvmefs.sh - the kernel nvme driver against nvmefs on one QEMU
# NVMe controller, in one guest boot (tests/vm), same jobs on the same device:
#   1. kernel driver: fio 4K randread QD1 and QD32 (libaio, direct=1) on
#      /dev/nvme0n1
#   2. the controller moved to vfio-pci: nvmefs-perf -w randread -s 4096
#      -q 1 / -q 32 (the engine alone, one reactor polling)
#   3. nvmefsd on it: the same fio jobs on its FUSE file
# Prints IOPS, mean and p99 latency, the ratio to the kernel driver, and
# doorbell writes per I/O where they can be counted (nvmefs-perf counts its
# own; the kernel's are not visible from user space).
# Under TCG the guest runs at emulation speed: compare the ratios of one run,
# never the absolute numbers across runs or machines.
#
# Usage: BUILD=build sh bench/kernel-vs-nvmefs.sh [SECONDS]   (default 5 s per job)
# Output: the table on stdout; raw JSON and the guest log in $BUILD/bench-kvn/.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${BUILD:=$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
export ROOT BUILD
SECS=${1:-5}
# lib.sh takes the guest image, the lock and vm_run from the VM tests
. "$ROOT/tests/vm/lib.sh"
VM_HERE=$ROOT/tests/vm
vm_prepare
for b in nvmefsd nvmefs-perf; do
	[ -x "$BUILD/$b" ] || make -C "$ROOT" B="$BUILD" "$BUILD/$b" >/dev/null || fail "building $b"
done
command -v fio >/dev/null || fail "fio missing (scripts/deps.sh)"
OUT=$BUILD/bench-kvn
rm -rf "$OUT" && mkdir -p "$OUT"
DIR=$VMBIN/kvn
rm -rf "$DIR" && mkdir -p "$DIR"
cp "$BUILD/nvmefsd" "$BUILD/nvmefs-perf" "$DIR/"
cat > "$DIR/perf.conf" <<EOF
[daemon]
file_owner = 0
file_group = 0
[engine]
queues = 1
cpus = 1
queue_depth = 64
mode = poll
[controller nvme0]
device = $BDF
EOF
cat > "$DIR/fuse.conf" <<EOF
[daemon]
mountpoint = /tmp/kvn/mnt
admin_socket = /tmp/kvn/admin.sock
file_owner = 0
file_group = 0
[engine]
queues = 1
cpus = 1
queue_depth = 64
mode = poll
[controller nvme0]
device = $BDF
EOF
# Each measured job starts with the controller being enabled (a reset for the
# kernel driver, a fresh open for nvmefs), so that a doorbell trace of the
# run splits into one segment per job at QEMU's "controller started" events.
cat > "$DIR/cmd.sh" <<EOF
cd /payload/kvn
mkdir -p /tmp/kvn
export PATH=/payload/kvn:\$PATH
# fio FILE NAME QD: 4K randread over the first 64 MiB, JSON between markers
fio_job() {
	echo "@@JSON \$2-qd\$3"
	fio --name=\$2 --filename=\$1 --ioengine=libaio --direct=1 --rw=randread --bs=4k \
		--iodepth=\$3 --size=64M --runtime=$SECS --time_based --lat_percentiles=1 \
		--output-format=json
	echo "@@END"
}
kreset() {
	echo 1 > /sys/class/nvme/nvme0/reset_controller
	i=0
	while [ "\$(cat /sys/class/nvme/nvme0/state)" != live ] && [ \$i -lt 300 ]; do usleep 100000; i=\$((i + 1)); done
}
# the region read by every job holds data (not holes in QEMU's image)
/usr/bin/dd if=/dev/urandom of=/dev/nvme0n1 bs=1M count=64 oflag=direct status=none || exit 1
kreset; fio_job /dev/nvme0n1 kernel 1
kreset; fio_job /dev/nvme0n1 kernel 32
vfio-bind $BDF || exit 1
for qd in 1 32; do
	echo "@@JSON perf-qd\$qd"
	nvmefs-perf -c perf.conf -w randread -s 4096 -q \$qd -t $SECS --json || exit 1
	echo "@@END"
done
for qd in 1 32; do
	nvmefsd -f -c fuse.conf > /tmp/kvn/daemon.log 2>&1 &
	D=\$!
	i=0
	while [ ! -f /tmp/kvn/mnt/nvme0n1 ] && [ \$i -lt 600 ]; do usleep 100000; i=\$((i + 1)); done
	fio_job /tmp/kvn/mnt/nvme0n1 fuse \$qd
	kill -TERM \$D
	wait \$D || exit 1
done
EOF
LOG=$OUT/guest.log
vm_run "$LOG" -U -p "$DIR" -f "$DIR/cmd.sh" > /dev/null || { tail -n 30 "$LOG"; fail "the guest run failed"; }
TRACE=
if [ "${DOORBELLS:-1}" = 1 ]; then
	# a second boot, only to count doorbell writes on QEMU's side (tracing
	# slows QEMU down, so this run's speed is not reported)
	TRACE=$OUT/trace.log
	vm_run "$OUT/guest-traced.log" -U -p "$DIR" -f "$DIR/cmd.sh" \
		-Q -trace -Q enable=pci_nvme_mmio_doorbell_sq -Q -trace -Q enable=pci_nvme_mmio_doorbell_cq \
		-Q -trace -Q enable=pci_nvme_mmio_start_success -Q -D -Q "$TRACE" > /dev/null ||
		{ tail -n 30 "$OUT/guest-traced.log"; fail "the traced guest run failed"; }
fi
echo "kernel-vs-nvmefs: $(date -u '+%Y-%m-%d %H:%M UTC'), $(qemu-system-x86_64 --version | head -1), $SECS s per job"
python3 - "$LOG" "$OUT" "$TRACE" "$OUT/guest-traced.log" <<'PY'
import json, re, sys
log, out, trace, tlog = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ORDER = ["kernel-qd1", "kernel-qd32", "perf-qd1", "perf-qd32", "fuse-qd1", "fuse-qd32"]

def blocks_of(path, save=False):
    res, name, buf = {}, None, []
    for line in open(path):
        line = line.rstrip("\n")
        m = re.match(r"^@@JSON (\S+)$", line)
        if m:
            name, buf = m.group(1), []
        elif line == "@@END" and name:
            t = "\n".join(buf)
            t = t[t.index("{"):]  # fio may print notes before the JSON
            res[name] = json.loads(t)
            if save:
                open("%s/%s.json" % (out, name), "w").write(t)
            name = None
        elif name:
            buf.append(line)
    return res

def ios_of(k, d):
    return d["total"]["ios"] if k.startswith("perf") else d["jobs"][0]["read"]["total_ios"]

blocks = blocks_of(log, True)
rows = {}
for k, d in blocks.items():
    if k.startswith("perf"):
        t = d["total"]
        if t["errors"]:
            sys.exit("nvmefs-perf %s: %d errors" % (k, t["errors"]))
        rows[k] = (t["iops"], t["lat_us"]["avg"], t["lat_us"]["p99"])
        print("nvmefs-perf %s: %.3f doorbells per I/O by its own count" % (k, t["doorbells_per_io"]))
    else:
        j = d["jobs"][0]
        if j["error"]:
            sys.exit("fio %s: error %d" % (k, j["error"]))
        r = j["read"]
        rows[k] = (r["iops"], r["lat_ns"]["mean"] / 1000.0, r["lat_ns"]["percentile"]["99.000000"] / 1000.0)

# doorbell writes to the I/O queues (qid != 0) per segment: one segment per
# controller start; the boot and the fill come first, then one per job in ORDER
dbio = {}
if trace:
    seg, counts = -1, []
    for line in open(trace):
        if "pci_nvme_mmio_start_success" in line:
            seg += 1
            counts.append(0)
        elif "pci_nvme_mmio_doorbell_" in line and seg >= 0:
            m = re.search(r"[sc]qid (\d+)", line)
            if m and m.group(1) != "0":
                counts[seg] += 1
    tb = blocks_of(tlog)
    # the boot may enable the controller more than once: the jobs are the last segments
    if len(counts) > len(ORDER) and all(k in tb for k in ORDER):
        for k, n in zip(ORDER, counts[-len(ORDER):]):
            dbio[k] = n / ios_of(k, tb[k])
    else:
        print("doorbell trace: %d controller starts, expected more than %d: not counted" % (
            len(counts), len(ORDER)))

print("%-26s %3s %9s %8s %9s %8s %9s %7s" % ("path", "QD", "IOPS", "xkernel", "mean(us)", "xkernel",
                                           "p99(us)", "DB/IO*"))
label = {"kernel": "kernel nvme (fio)", "perf": "nvmefs-perf (engine)", "fuse": "nvmefsd FUSE file (fio)"}
for qd in (1, 32):
    base = rows.get("kernel-qd%d" % qd)
    for p in ("kernel", "perf", "fuse"):
        k = "%s-qd%d" % (p, qd)
        r = rows.get(k)
        if not r or not base:
            print("%-26s %3d missing" % (label[p], qd))
            continue
        print("%-26s %3d %9.0f %7.2fx %9.1f %7.2fx %9.1f %7s" % (
            label[p], qd, r[0], r[0] / base[0], r[1], r[1] / base[1], r[2],
            "%.3f" % dbio[k] if k in dbio else "n/a"))
print("* DB/IO: SQ tail + CQ head doorbell writes to the I/O queues per I/O, counted by QEMU's")
print("  trace events in a second, traced boot.  Latency: fio's total (submission to completion).")
PY
