#!/bin/sh
# soak.sh - a long fio verify run through the FUSE file while faults are
# injected at random moments; a verdict and a plot.  `make soak` runs it.
#
#   sh bench/soak.sh [OUTDIR]      (default bench/soak; as root)
#
# The daemon runs on the software controller in thread mode (1 GiB RAM
# namespace, io_timeout_ms 500, io_retries 3).  fio: randrw 4 KiB..1 MiB,
# 2 jobs x QD 64, libaio, O_DIRECT, crc32c verify of everything it wrote,
# verify_fatal, I/O errors counted but not fatal (continue_on_error=io).
# Every SOAK_GAP_MIN..SOAK_GAP_MAX seconds (seeded) one fault, through
# `nvmefsctl inject`:
#   delay  every command takes 800 ms (past the timeout) for 3 s, then clear
#   hang   the controller stops fetching for 2 s, then unhang
#   lose   the next 4 completions are never posted
#   cfs    controller fatal status (the engine resets it)
#   fail   the next 3 commands fail with a media error (fio sees EIO)
# Every 10 s: I/O per second, the daemon's RSS, engine errors, resets,
# resubmissions, timeouts.  Writes OUTDIR/soak.csv, OUTDIR/faults.log,
# OUTDIR/verdict.txt and OUTDIR/soak.png (gnuplot).  The verdict: PASS when
# fio saw no verify mismatch, the run ended (no hang: fio finished within
# its time plus 60 s), the daemon is alive and serves a read afterwards, and
# RSS is flat (the last third's peak within 10% + 8 MiB of the first
# third's peak).
#
# SOAK_SECONDS (600), SOAK_SEED (1), SOAK_GAP_MIN (15), SOAK_GAP_MAX (40).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${1:-$ROOT/bench/soak}
SECS=${SOAK_SECONDS:-600}
SEED=${SOAK_SEED:-1}
GMIN=${SOAK_GAP_MIN:-15}
GMAX=${SOAK_GAP_MAX:-40}
# the audit build when there is one (src/fuse/audit.h): a violation fails
# the soak; fio's completions of another byte count than asked too
# (tests/preload/shortio.c)
D=$BUILD/nvmefsd
[ -x "$BUILD/nvmefsd-audit" ] && D=$BUILD/nvmefsd-audit
PRELOAD=
[ -x "$BUILD/tools/shortio.so" ] && PRELOAD="LD_PRELOAD=$BUILD/tools/shortio.so"
CTL=$BUILD/nvmefsctl
[ "$(id -u)" = 0 ] || { echo "soak: needs root (mounts FUSE)"; exit 2; }
[ -x "$D" ] && [ -x "$CTL" ] || { echo "soak: build first (make)"; exit 2; }
command -v fio >/dev/null || { echo "soak: fio missing (scripts/deps.sh)"; exit 2; }
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/nvmefs-soak.XXXXXX)
MNT=$TMP/mnt
SOCK=$TMP/admin.sock
DPID=
FPID=
cleanup() {
	[ -n "$FPID" ] && kill "$FPID" 2>/dev/null
	[ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
	umount -l "$MNT" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

cat > "$TMP/nvmefs.conf" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $SOCK
file_mode = 0660
log_level = info
[engine]
queues = 1
cpus = 0
mode = hybrid
queue_depth = 256
io_timeout_ms = 500
io_retries = 3
[controller nvme0]
device = sim
size = 1G
block_size = 4096
exec = thread
EOF
"$D" -f -c "$TMP/nvmefs.conf" > "$OUT/daemon.log" 2>&1 &
DPID=$!
i=0
while [ ! -f "$MNT/nvme0n1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$MNT/nvme0n1" ] || { echo "soak: the daemon did not come up"; tail "$OUT/daemon.log"; exit 1; }

ctl() { "$CTL" -s "$SOCK" "$@"; }

rm -f "$OUT/shortio.log"
env $PRELOAD NVMEFS_SHORTIO_LOG="$OUT/shortio.log" \
	fio --name=soak --filename="$MNT/nvme0n1" --ioengine=libaio --direct=1 --rw=randrw \
	--bsrange=4k-1m --iodepth=64 --numjobs=2 --size=256M --offset_increment=256M \
	--runtime="$SECS" --time_based --verify=crc32c --verify_backlog=256 --verify_fatal=1 \
	--verify_state_save=0 --continue_on_error=io --output-format=json \
	--output="$OUT/fio.json" > "$OUT/fio.err" 2>&1 &
FPID=$!
START=$(date +%s)

# sample every 10 s; inject at seeded random moments in between
echo "t,iops,rss_kib,errors,resets,resubmitted,timeouts,fault" > "$OUT/soak.csv"
: > "$OUT/faults.log"
SCHED=$(awk -v s="$SEED" -v n="$SECS" -v a="$GMIN" -v b="$GMAX" 'BEGIN { srand(s); t = a
	split("delay hang lose cfs fail", f, " ")
	while (t < n - 10) { printf "%d:%s ", t, f[1 + int(rand() * 5)]; t += a + int(rand() * (b - a)) } }')
sample() { # print completed errors resets resubmitted timeouts
	ctl --json stats 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print("0 0 0 0 0"); sys.exit(0)
t = d.get("totals", {})
err = t.get("errors", {})
errors = err.get("total", 0) if isinstance(err, dict) else err
r = s = o = 0
for c in d.get("controllers", []):
    rc = c.get("recovery", c)
    r += rc.get("resets_started", 0); s += rc.get("resubmitted", 0); o += rc.get("timeouts", 0)
print(t.get("completed", 0), errors, r, s, o)'
}
inject() { # FAULT: apply it (and undo it later where it has a duration)
	now=$(($(date +%s) - START))
	case $1 in
	delay) ctl inject nvme0 delay 800 && (sleep 3; ctl inject nvme0 clear) & ;;
	hang) ctl inject nvme0 hang && (sleep 2; ctl inject nvme0 unhang) & ;;
	lose) ctl inject nvme0 lose 4 ;;
	cfs) ctl inject nvme0 cfs ;;
	fail) ctl inject nvme0 fail 3 0x281 ;;
	esac
	echo "$now $1" >> "$OUT/faults.log"
}
set -- $(sample)
prev=$1
last=$START
next_fault=${SCHED%% *}
SCHED=${SCHED#* }
while kill -0 "$FPID" 2>/dev/null; do
	sleep 1
	now=$(date +%s)
	el=$((now - START))
	fault=
	if [ -n "$next_fault" ] && [ "$el" -ge "${next_fault%%:*}" ]; then
		fault=${next_fault#*:}
		inject "$fault"
		case "$SCHED" in *:*) next_fault=${SCHED%% *}; SCHED=${SCHED#* } ;; *) next_fault= ;; esac
	fi
	if [ $((now - last)) -ge 10 ]; then
		set -- $(sample)
		rss=$(awk '/^VmRSS/ { print $2 }' /proc/"$DPID"/status 2>/dev/null)
		iops=$(( ($1 - prev) / (now - last) ))
		echo "$el,$iops,${rss:-0},$2,$3,$4,$5,$(tail -n 1 "$OUT/faults.log" | awk -v e="$el" '$1 > e - 10 { print $2 }')" >> "$OUT/soak.csv"
		prev=$1
		last=$now
	fi
	if [ "$el" -gt $((SECS + 60)) ]; then
		echo "soak: fio still running 60 s after its time: hang" | tee -a "$OUT/verdict.txt"
		break
	fi
done
HUNG=0
if kill -0 "$FPID" 2>/dev/null; then
	HUNG=1
	kill -9 "$FPID"
fi
wait "$FPID"
FIORC=$?
FPID=
ctl inject nvme0 clear > /dev/null 2>&1
ALIVE=0
kill -0 "$DPID" 2>/dev/null && timeout 20 dd if="$MNT/nvme0n1" of=/dev/null bs=1M count=4 iflag=direct status=none && ALIVE=1
kill -TERM "$DPID"
wait "$DPID"
DRC=$?
DPID=

python3 - "$OUT" "$FIORC" "$HUNG" "$ALIVE" "$DRC" <<'PY' | tee "$OUT/verdict.txt"
import csv, json, sys
out, fiorc, hung, alive, drc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = list(csv.DictReader(open(out + "/soak.csv")))
txt = open(out + "/fio.json").read()
err = open(out + "/fio.err").read().lower()
# fio's words for a verify failure (crc32c mismatch, bad header or magic)
mismatch = any(w in err for w in ("verify failed", "bad header", "bad magic", "verify: bad"))
ioerr = 0
try:
    d = json.loads(txt[txt.index("{"):])
    for j in d["jobs"]:
        ioerr += j.get("total_err", 0)
        if j.get("error", 0) not in (0, 5):  # 5: EIO counted, not fatal
            mismatch = mismatch or j["error"] == 84  # EILSEQ: verify failure
except Exception as e:
    print("fio json unreadable:", e)
faults = [l.split() for l in open(out + "/faults.log")]
rss = [int(r["rss_kib"]) for r in rows if int(r["rss_kib"]) > 0]
third = max(1, len(rss) // 3)
flat = bool(rss) and max(rss[-third:]) <= max(rss[:third]) * 1.10 + 8192
iops = [int(r["iops"]) for r in rows]
print("soak: %d s, %d samples, %d faults injected (%s)" % (
    int(rows[-1]["t"]) if rows else 0, len(rows), len(faults),
    ", ".join(sorted({f[1] for f in faults}))))
print("fio: exit %d, I/O errors reported %d, verify mismatch: %s" % (fiorc, ioerr, "YES" if mismatch else "none"))
if rows:
    print("engine: errors %s, resets %s, resubmitted %s, timeouts %s" % (
        rows[-1]["errors"], rows[-1]["resets"], rows[-1]["resubmitted"], rows[-1]["timeouts"]))
    print("IOPS per 10 s: min %d, median %d, max %d" % (min(iops), sorted(iops)[len(iops) // 2], max(iops)))
if rss:
    print("RSS: first third peak %d KiB, last third peak %d KiB: %s" % (
        max(rss[:third]), max(rss[-third:]), "flat" if flat else "GROWING"))
print("hang: %s; daemon served a read afterwards: %s; daemon exit on SIGTERM: %d" % (
    "YES" if hung else "no", "yes" if alive else "NO", drc))
log = open(out + "/daemon.log").read()
viol = log.count("audit: VIOLATION")
try:
    short = len(open(out + "/shortio.log").readlines())
except OSError:
    short = 0
audit = [l for l in log.splitlines() if "audit: " in l and "violation(s)" in l]
print("audit: %d violation(s)%s; fio completions of another byte count than asked: %d" % (
    viol, (" (" + audit[-1].split("audit: ", 1)[1] + ")") if audit else " (not the audit build)",
    short))
ok = not mismatch and not hung and alive and flat and drc == 0 and not viol and not short
print("verdict:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
V=$?
if command -v gnuplot >/dev/null; then
	arrows=$(awk '{ printf "set arrow from first %d, graph 0 to first %d, graph 1 nohead lc rgb \"#c04040\" dt 2\n", $1, $1 }' "$OUT/faults.log")
	gnuplot <<EOF
set terminal pngcairo size 1100,600 noenhanced
set output "$OUT/soak.png"
set datafile separator ","
set title "nvmefs soak (dashed: fault injected): fio verify randrw 4K-1M 2x QD64 through FUSE, sim thread mode, faults injected (seed $SEED)"
set xlabel "seconds"
set ylabel "I/O per second"
set y2label "daemon RSS (MiB)"
set y2tics
set ytics nomirror
set key outside bottom center horizontal
set grid
set yrange [0:*]
set y2range [0:*]
set xrange [0:*]
$arrows
plot "$OUT/soak.csv" every ::1 using 1:2 with linespoints title "IOPS (10 s)", \
     "$OUT/soak.csv" every ::1 using 1:(\$3/1024) axes x1y2 with lines lw 2 title "RSS (MiB)"
EOF
else
	echo "soak: gnuplot missing (scripts/deps.sh bench): no plot"
fi
exit $V
