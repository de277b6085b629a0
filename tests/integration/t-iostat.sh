#!/bin/sh
# t-iostat.sh - the per-namespace and per-reactor figures against what fio
# measured in the same run: stats --json (counts, bytes, latency sums and
# raw buckets) exactly against fio's totals and within the engine's bucket
# resolution against its total latencies (submission to completion); iostat
# --json's and top's rates, summed over reports that cover one window
# holding a whole fio run, against fio's count of reads (exactly, and
# within what top's rounding allows); flush and punch counted; the
# metrics' namespace series and promtool check metrics; top on a terminal
# (ncurses, under script(1)) and plain; reactor busy time in poll mode when
# idle and under load.
. "$(dirname "$0")/lib.sh"
lib_init
command -v fio > /dev/null || { fail "fio is not installed"; finish; }
ncpu=$(nproc)
QUEUES=1
CPUS=0
[ "$ncpu" -ge 2 ] && { QUEUES=2; CPUS=0-1; }
conf_sim nvme0 64M backing=ram
F=$MNT/nvme0n1
daemon_start nvme0n1 || { fail "start"; finish; }

# ---- totals: a fixed randrw job against the stats before and after ----
ctl stats --json > "$TMP/s0.json" || fail "stats before"
fio --name=mix --filename="$F" --ioengine=libaio --direct=1 --allow_file_create=0 \
	--rw=randrw --rwmixread=70 --bs=4k --iodepth=8 --size=32M --io_size=16M \
	--randseed=42 --lat_percentiles=1 --output-format=json --output="$TMP/fio-mix.json" \
	> "$TMP/fio.err" 2>&1 ||
	{ cat "$TMP/fio.err"; fail "fio randrw"; }
ctl stats --json > "$TMP/s1.json" || fail "stats after"
python3 - "$TMP/s0.json" "$TMP/s1.json" "$TMP/fio-mix.json" <<'PY' || fail "stats against fio's totals"
import json, sys
s0, s1 = (json.load(open(p)) for p in sys.argv[1:3])
t = open(sys.argv[3]).read(); f = json.loads(t[t.index("{"):])["jobs"][0]
def ns(s):
    return [n for n in s["namespaces"] if n["name"] == "nvme0n1"][0]
a, b = ns(s0), ns(s1)
bad = 0
for op in ("read", "write"):
    d = {k: b["ops"][op][k] - a["ops"][op][k] for k in ("count", "bytes", "sum_ns", "errors")}
    hist = {}
    for le, c in b["ops"][op]["buckets"]: hist[le] = c
    for le, c in a["ops"][op]["buckets"]: hist[le] -= c
    hn = sum(hist.values())
    fo = f[op]
    # against fio's total latency (submission to completion): its clat
    # starts when io_submit has returned, and the daemon may have taken,
    # even answered, the request before that (a reactor on fio's CPU)
    lat = fo["lat_ns"]
    print("%s: daemon %d requests %d bytes mean %.1f us; fio %d ios %d bytes lat mean %.1f us p99 %.1f us" % (
        op, d["count"], d["bytes"], d["sum_ns"] / max(d["count"], 1) / 1e3, fo["total_ios"],
        fo["io_bytes"], lat["mean"] / 1e3, lat["percentile"]["99.000000"] / 1e3))
    # each 4 KiB O_DIRECT request is one FUSE request: the counts are exact
    if d["count"] != fo["total_ios"] or d["bytes"] != fo["io_bytes"] or d["errors"]:
        print("FAIL: %s: counts differ from fio's" % op); bad += 1
    if hn != d["count"]:
        print("FAIL: %s: the raw buckets count %d, the counter %d" % (op, hn, d["count"])); bad += 1
    # the daemon's time is part of what fio waits for
    mean = d["sum_ns"] / max(d["count"], 1)
    if not (0 < mean <= lat["mean"]):
        print("FAIL: %s: daemon mean %.0f ns, fio's %.0f ns" % (op, mean, lat["mean"])); bad += 1
    # percentiles from the buckets (upper bounds, within 12.5%) against
    # fio's.  A request's time starts at its reactor pass's clock, read
    # once per pass before the pass reads its requests, so a pass that is
    # preempted while reading makes its late requests look older than they
    # are: the median is held to fio's median, the p99 (where such passes
    # are) to fio's p99.9
    def pct(q):
        want, acc = q * hn, 0
        for le in sorted(hist):
            acc += hist[le]
            if acc >= want: return le
        return 0
    for q, name, fq in ((0.5, "p50", "50.000000"), (0.99, "p99", "99.900000")):
        mine, theirs = pct(q), lat["percentile"][fq]
        if not (0 < mine <= theirs * 1.125 + 2000):
            print("FAIL: %s: daemon %s %d ns, fio's p%s %d ns" % (op, name, mine, fq[:4].rstrip("0").rstrip("."), theirs)); bad += 1
if b["inflight"] != 0:
    print("FAIL: %d requests in flight after fio" % b["inflight"]); bad += 1
if b["busy_ns"] <= a["busy_ns"]:
    print("FAIL: busy time did not grow"); bad += 1
sys.exit(1 if bad else 0)
PY

# ---- flush and punch reach the namespace's figures ----
ctl stats --json > "$TMP/s2.json"
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY); os.fsync(fd); os.close(fd)' "$F" ||
	fail "fsync"
fallocate --punch-hole --keep-size -o 1M -l 64K "$F" || fail "punch"
ctl stats --json > "$TMP/s3.json"
python3 - "$TMP/s2.json" "$TMP/s3.json" <<'PY' || fail "flush and punch counts"
import json, sys
a, b = ([n for n in json.load(open(p))["namespaces"] if n["name"] == "nvme0n1"][0] for p in sys.argv[1:])
fl = b["ops"]["flush"]["count"] - a["ops"]["flush"]["count"]
pu = b["ops"]["punch"]["count"] - a["ops"]["punch"]["count"]
pb = b["ops"]["punch"]["bytes"] - a["ops"]["punch"]["bytes"]
print("flushes %d, punches %d (%d bytes)" % (fl, pu, pb))
sys.exit(0 if fl >= 1 and pu == 1 and pb == 65536 else 1)
PY

# ---- rates over a window: iostat --json and top against fio's count ----
# iostat and top report every second from before fio starts until after it
# has ended; their reports cover consecutive intervals (each from the last
# snapshot to the next), so rate x interval summed over them is what the
# daemon counted over one window that holds the whole fio run: exactly
# fio's completed reads.  No rate of one process is held against a rate
# of another over other times (that failed on a busy machine).
"$C" -s "$TMP/admin.sock" iostat --json 1 > "$TMP/iostat.jsonl" 2> "$TMP/iostat.err" &
IOSTAT=$!
"$C" -s "$TMP/admin.sock" top 1 > "$TMP/top.txt" 2> "$TMP/top.err" < /dev/null &
TOP=$!
# the reports each has printed so far
iostat_n() { grep -c . "$TMP/iostat.jsonl"; }
top_n() { grep -c '^nvmefs top - ' "$TMP/top.txt"; }
# opening edge: each has printed a report, so its snapshot was taken
wait_until 10 eval '[ "$(iostat_n)" -ge 1 ] && [ "$(top_n)" -ge 1 ]' ||
	fail "iostat/top printed nothing within 10 s: $(cat "$TMP/iostat.err" "$TMP/top.err")"
fio --name=rate --filename="$F" --ioengine=libaio --direct=1 --allow_file_create=0 \
	--rw=randread --bs=4k --iodepth=8 --size=32M --time_based --runtime=3 \
	--output-format=json --output="$TMP/fio-rate.json" > "$TMP/fio.err" 2>&1 ||
	{ cat "$TMP/fio.err"; fail "fio randread"; }
# closing edge: the second report printed after fio ended took its
# snapshot after the first of them was printed, so after fio ended
ni=$(($(iostat_n) + 2)) nt=$(($(top_n) + 2))
wait_until 20 eval '[ "$(iostat_n)" -ge $ni ] && [ "$(top_n)" -ge $nt ]' ||
	fail "iostat/top stopped reporting: $(cat "$TMP/iostat.err" "$TMP/top.err")"
kill -TERM $IOSTAT $TOP
wait $IOSTAT || fail "iostat --json exited $?: $(cat "$TMP/iostat.err")"
wait $TOP || fail "top (plain) exited $?: $(cat "$TMP/top.err")"
python3 - "$TMP/iostat.jsonl" "$TMP/top.txt" "$TMP/fio-rate.json" <<'PY' || fail "rates against fio"
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = open(sys.argv[3]).read(); f = json.loads(t[t.index("{"):])["jobs"][0]["read"]
n = f["total_ios"]
bad = 0
if len(lines) < 3 or not lines[0]["since_start"] or any(l["since_start"] for l in lines[1:]):
    print("FAIL: iostat --json 1 gave %d reports" % len(lines)); sys.exit(1)
rep = [(l, [x for x in l["namespaces"] if x["name"] == "nvme0n1"][0]) for l in lines[1:]]
span = sum(l["interval_s"] for l, _ in rep)
reads = sum(r["r_s"] * l["interval_s"] for l, r in rep)
busy = [(l, r) for l, r in rep if r["r_s"] > 0]
lat = sum(r["r_await_ms"] * r["r_s"] * l["interval_s"] for l, r in busy)
aqu = sum(r["aqu_sz"] * l["interval_s"] for l, r in rep) / span
print("fio: %d reads, lat mean %.3f ms; iostat over %d reports (%.2f s): %.1f reads, "
      "r_await %.3f ms, aqu-sz %.2f, %%util up to %.1f" % (
      n, f["lat_ns"]["mean"] / 1e6, len(rep), span, reads, lat / max(reads, 1), aqu,
      max(r["util_pct"] for _, r in rep)))
if n == 0 or round(reads) != n:
    print("FAIL: iostat counted %.1f reads over the window, fio completed %d" % (reads, n)); bad += 1
# the same reads: the daemon's part of each is within fio's time for it
if not (0 < lat / max(reads, 1) <= f["lat_ns"]["mean"] / 1e6 * 1.25):
    print("FAIL: r_await %.3f ms against fio's %.3f ms over the same reads" % (
        lat / max(reads, 1), f["lat_ns"]["mean"] / 1e6)); bad += 1
# fio keeps at most 8 in flight, and the window holds idle time too
if not (0 < aqu <= 8) or not all(0 <= r["util_pct"] <= 100 for _, r in rep) or \
        not any(r["util_pct"] > 0 for _, r in rep):
    print("FAIL: aqu-sz %.2f over the window (fio keeps 8 in flight) or %%util %s" % (
        aqu, [r["util_pct"] for _, r in rep])); bad += 1
if any(r["w_s"] != 0 for _, r in rep):
    print("FAIL: writes counted during a read-only job"); bad += 1
# top's plain frames: r/s printed to the unit, the interval to 0.1 s, so
# its reads over the window lie within these bounds
top = open(sys.argv[2]).read()
frames = [fr for fr in top.split("nvmefs top - ") if fr.strip()]
if len(frames) < 3 or any(k not in frames[1] for k in ("NAMESPACE", "REACTOR", "CONTROLLER")):
    print("FAIL: top printed %d frames:\n%s" % (len(frames), top)); sys.exit(1)
lo = hi = 0
rbusy = []
for fr in frames[1:]:
    dt = float(re.match(r"up \d+ s, rates over ([0-9.]+) s", fr).group(1))
    row = [l.split() for l in fr.splitlines() if l.startswith("nvme0n1 ")][0]
    rs = float(row[2])
    lo += max(rs - 0.5, 0) * max(dt - 0.05, 0)
    hi += (rs + 0.5) * (dt + 0.05)
    # a reactor that made no pass in the interval shows "-"
    rbusy += [float(l.split()[3]) for l in fr.splitlines()
              if l.split() and l.split()[0].isdigit() and len(l.split()) == 8 and l.split()[3] != "-"]
    ctl = [l for l in fr.splitlines() if l.startswith("nvme0 ")]
    if not ctl or ctl[0].split()[1] != "live":
        print("FAIL: the controller row: %s" % ctl); bad += 1
print("top: %d frames, %.0f to %.0f reads over the window, reactors busy up to %s%%" % (
    len(frames) - 1, lo, hi, max(rbusy or [0])))
if not (lo <= n <= hi):
    print("FAIL: top's r/s over its frames make %.0f to %.0f reads, fio completed %d" % (lo, hi, n)); bad += 1
if not rbusy or max(rbusy) <= 0:
    print("FAIL: no reactor busy under load"); bad += 1
sys.exit(1 if bad else 0)
PY

# ---- iostat text, top on a terminal ----
ctl iostat -x > "$TMP/iostat.txt" || fail "iostat -x"
grep -q "r_await" "$TMP/iostat.txt" && grep -q "^nvme0n1 " "$TMP/iostat.txt" ||
	fail "iostat -x output: $(cat "$TMP/iostat.txt")"
ctl -x top 1 1 > /dev/null 2>&1 && fail "-x with top was taken"
if command -v script > /dev/null; then
	TERM=xterm script -qec "$C -s $TMP/admin.sock top 1 2" /dev/null > "$TMP/tty.txt" 2>&1 ||
		fail "top on a terminal: $(cat "$TMP/tty.txt")"
	# ncurses drew it: escape sequences and the tables
	grep -q "$(printf '\033')\[" "$TMP/tty.txt" && grep -q "NAMESPACE" "$TMP/tty.txt" &&
		grep -q "nvme0n1" "$TMP/tty.txt" || fail "top on a terminal drew no view"
fi

# ---- metrics ----
ctl metrics > "$TMP/metrics" || fail "metrics"
if command -v promtool > /dev/null; then
	promtool check metrics < "$TMP/metrics" > "$TMP/lint" 2>&1 || fail "promtool: $(cat "$TMP/lint")"
fi
for m in 'nvmefs_namespace_requests_total{namespace="nvme0n1",controller="nvme0",op="read"}' \
	'nvmefs_namespace_request_latency_seconds_count{namespace="nvme0n1",controller="nvme0",op="write"}' \
	'nvmefs_namespace_busy_seconds_total{namespace="nvme0n1",controller="nvme0"}' \
	'nvmefs_reactor_busy_seconds_total{reactor="0",cpu="0"}'; do
	v=$(grep -F "$m " "$TMP/metrics" | awk '{print $2}')
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "${v:-0}" ||
		fail "metric $m is ${v:-missing}"
done
daemon_stop

# ---- reactor load in poll mode: idle is not busy ----
MODE=poll QUEUES=1 CPUS=0 conf_sim nvme0 64M backing=ram
daemon_start nvme0n1 || { fail "start (poll)"; finish; }
sleep 1
ctl stats --json > "$TMP/p0.json"
sleep 2
ctl stats --json > "$TMP/p1.json"
fio --name=load --filename="$F" --ioengine=libaio --direct=1 --allow_file_create=0 \
	--rw=randread --bs=4k --iodepth=16 --size=32M --time_based --runtime=2 \
	--output-format=json --output="$TMP/fio-poll.json" > "$TMP/fio.err" 2>&1 || fail "fio (poll)"
ctl stats --json > "$TMP/p2.json"
python3 - "$TMP/p0.json" "$TMP/p1.json" "$TMP/p2.json" <<'PY' || fail "reactor busy in poll mode"
import json, sys
s = [json.load(open(p))["reactors"][0] for p in sys.argv[1:]]
def frac(a, b):
    busy = b["busy_ns"] - a["busy_ns"]; idle = b["idle_ns"] - a["idle_ns"]
    return busy / max(busy + idle, 1), b["passes"] - a["passes"]
idle, passes = frac(s[0], s[1])
load, _ = frac(s[1], s[2])
print("poll mode: idle %.1f%% busy over %d passes; under fio %.1f%% busy" % (idle * 100, passes, load * 100))
bad = 0
if passes < 1000:
    print("FAIL: a polling reactor made only %d passes in 2 s" % passes); bad += 1
if idle > 0.2:
    print("FAIL: an idle polling reactor counts %.0f%% busy" % (idle * 100)); bad += 1
if not load > idle or load <= 0.05:
    print("FAIL: under load %.1f%% busy, idle %.1f%%" % (load * 100, idle * 100)); bad += 1
sys.exit(1 if bad else 0)
PY
daemon_stop
finish
