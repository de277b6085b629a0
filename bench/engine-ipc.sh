#!/bin/sh
# engine-ipc.sh - instructions per 4 KiB I/O spent in the engine, and its
# data-cache misses, on the software controller's null namespace.
#
# Method: nvmefs-perf runs 4 KiB randread on one reactor in poll mode against
# a null namespace executed inline (the device model runs inside the doorbell
# write, so there is no second thread and no idle polling).  It runs under
# callgrind twice, with -n N1 and -n N2 I/Os; the difference divided by
# N2-N1 is the cost of one I/O with start-up and shutdown cancelled.  The
# device's own cost is left out by subtracting the inclusive cost of the
# software controller's doorbell handler (everything below it is the device);
# the benchmark harness's own functions (src/perf) are reported apart.
# cachegrind then gives D1 misses per I/O the same way, and gdb prints the
# qpair's layout from the debug info: the hot fields in the first line.
#
# Usage: bench/engine-ipc.sh [-o FILE] [-q QD] [-n N1,N2]
#   env B: build directory (default build); SIM_FN: the device's doorbell
#   handler (default: found in src/sim).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case "$B" in /*) ;; *) B=$ROOT/$B ;; esac
PERF=$B/nvmefs-perf
OUT= QD=32 N1=200000 N2=400000
while getopts o:q:n: opt; do
	case $opt in
	o) OUT=$OPTARG ;;
	q) QD=$OPTARG ;;
	n) N1=${OPTARG%,*} N2=${OPTARG#*,} ;;
	*) echo "usage: $0 [-o FILE] [-q QD] [-n N1,N2]" >&2; exit 2 ;;
	esac
done
for t in valgrind callgrind_annotate cg_annotate python3; do
	command -v $t >/dev/null || { echo "$0: $t is missing (scripts/deps.sh bench)" >&2; exit 2; }
done
[ -x "$PERF" ] || { echo "$0: $PERF missing: make B=$B $PERF" >&2; exit 2; }
SIM_FN=${SIM_FN:-$(grep -ho 'db_notify *= *[A-Za-z_0-9]*' "$ROOT"/src/sim/*.c | head -1 | sed 's/.*= *//')}
[ -n "$SIM_FN" ] || { echo "$0: cannot find the software controller's db_notify handler; set SIM_FN" >&2; exit 2; }

TMP=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "keeping $TMP" >&2 || trap 'rm -rf "$TMP"' EXIT INT TERM
cat > "$TMP/null.conf" <<CONF
[daemon]
log_level = warn
[engine]
queues = 1
cpus = 0
mode = poll
queue_depth = 256
cq_budget = 64
[controller nvme0]
device = sim
backing = null
exec = inline
size = 1G
CONF

run() { # tool N
	case $1 in
	callgrind) valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$2" \
		"$PERF" -c "$TMP/null.conf" -w randread -s 4096 -q "$QD" -n "$2" > "$TMP/out.cg.$2" 2> "$TMP/vg.cg.$2" ;;
	cachegrind) valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$TMP/cachegrind.$2" \
		"$PERF" -c "$TMP/null.conf" -w randwrite -s 4096 -q "$QD" -n "$2" > "$TMP/out.cachegrind.$2" 2> "$TMP/vg.cachegrind.$2" ;;
	esac || { echo "$0: $1 run with -n $2 failed:" >&2; cat "$TMP/vg.$1.$2" "$TMP/out.$1.$2" >&2; exit 1; }
}
for n in "$N1" "$N2"; do
	run callgrind "$n"
	callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$TMP/cg.$n" > "$TMP/incl.$n"
	callgrind_annotate --auto=no --threshold=100 "$TMP/cg.$n" > "$TMP/self.$n"
	run cachegrind "$n"
	cg_annotate --auto=no --threshold=100 "$TMP/cachegrind.$n" > "$TMP/cga.$n" 2>/dev/null || \
		cg_annotate "$TMP/cachegrind.$n" > "$TMP/cga.$n"
done

gdb -batch -ex 'ptype /o struct nvme_qpair' "$PERF" > "$TMP/ptype" 2>/dev/null || true
sed -n '1,/qid;/p' "$TMP/ptype" | head -30 > "$TMP/layout"
# fields past the first line that the submit/reap path also reads or writes
# (qpair.c: trk_free_count, rw, submit_range, finish, nvme_qpair_reap)
grep -E ' (ntrk|held|shadow|ctrl|reactor|max_xfer|oldest|newest|parent_free|pool_iova|reaping|bad_sq_head);' "$TMP/ptype" > "$TMP/coldhot" || true

python3 - "$TMP" "$N1" "$N2" "$QD" "$SIM_FN" <<'PY' | tee "$TMP/report"
import re, sys
tmp, n1, n2, qd, simfn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
dn = n2 - n1
num = lambda s: int(s.replace(',', ''))
row = re.compile(r'^\s*([\d,]+)\s+(?:\([ \d.]+%\)\s+)?(\S.*?)\s*$')

def funcs(path):
    """function label -> Ir, and the program total, from callgrind_annotate."""
    total, fn = None, {}
    for line in open(path):
        m = row.match(line)
        if not m or '=>' in line:
            continue
        v, label = num(m.group(1)), m.group(2)
        if 'PROGRAM TOTALS' in label:
            total = v
        elif ':' in label:
            fn[label] = fn.get(label, 0) + v
    return total, fn

def name(label):
    # "file:function [object]" -> function
    return re.sub(r'\s*\[.*\]$', '', label).split(':', 1)[1].strip()

def klass(label):
    f = label.split(':', 1)[0]
    if 'src/engine/' in f or f.startswith('engine/'): return 'engine'
    if 'src/sim/' in f or f.startswith('sim/'): return 'device'
    if 'src/perf/' in f or f.startswith('perf/'): return 'harness'
    if 'ev.c' in f or 'libev' in label or f.startswith('ev_'): return 'libev'
    return 'libc/vdso/other'

t1, s1 = funcs(f'{tmp}/self.{n1}')
t2, s2 = funcs(f'{tmp}/self.{n2}')
_, i1 = funcs(f'{tmp}/incl.{n1}')
_, i2 = funcs(f'{tmp}/incl.{n2}')
def incl_of(d, fname):
    # inlined code lists a function under several files, each entry with the
    # function's whole inclusive cost: take the largest, not the sum
    return max([v for k, v in d.items() if name(k) == fname] or [0])
sim1, sim2 = incl_of(i1, simfn), incl_of(i2, simfn)
if not sim2:
    sys.exit(f'engine-ipc: no inclusive cost found for {simfn}')
per = lambda a, b: (b - a) / dn
tot = per(t1, t2)
dev = per(sim1, sim2)
harness = per(sum(v for k, v in s1.items() if klass(k) == 'harness'),
              sum(v for k, v in s2.items() if klass(k) == 'harness'))
engine = tot - dev - harness
print(f'4 KiB randread, null namespace, inline device, 1 reactor, poll, QD {qd}, -n {n1} and {n2}')
print(f'instructions per I/O, all                : {tot:8.1f}')
print(f'  device model (inclusive under {simfn}): {dev:8.1f}')
print(f'  benchmark harness (src/perf, self)     : {harness:8.1f}')
print(f'  engine (the rest: submit, doorbell, reap, complete, loop): {engine:8.1f}   goal <= 150: {"met" if engine <= 150 else "NOT met"}')
# by class, exclusive
cls = {}
for k in set(s1) | set(s2):
    c = klass(k)
    cls[c] = cls.get(c, 0) + per(s1.get(k, 0), s2.get(k, 0))
print('self cost per I/O by origin: ' + ', '.join(f'{c} {v:.1f}' for c, v in sorted(cls.items(), key=lambda x: -x[1])))
print('top functions, self instructions per I/O:')
d = sorted(((per(s1.get(k, 0), s2.get(k, 0)), k) for k in set(s1) | set(s2)), reverse=True)
for v, k in d[:15]:
    if v < 0.5: break
    label = re.sub(r' \[.*\]$', '', k)
    print(f'  {v:8.1f}  {klass(k):8s} {label}')

# cachegrind: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
def cg(path):
    ev, tot, fn = None, None, {}
    for line in open(path):
        if line.startswith('Events shown:'):
            ev = line.split(':', 1)[1].split()
            continue
        if not ev:
            continue
        cells = re.sub(r'\(\s*[\d.]+%\)', ' ', line).split()
        if len(cells) < len(ev) + 1:
            continue
        try:
            vals = [num(x) for x in cells[:len(ev)]]
        except ValueError:
            continue
        rest = ' '.join(cells[len(ev):])
        if 'PROGRAM TOTALS' in rest:
            tot = dict(zip(ev, vals))
        elif ':' in rest:
            fn[rest] = dict(zip(ev, vals))
    return tot, fn
c1, f1 = cg(f'{tmp}/cga.{n1}')
c2, f2 = cg(f'{tmp}/cga.{n2}')
if c1 and c2 and 'D1mr' in c1:
    dm = lambda a, b: per(a.get('D1mr', 0) + a.get('D1mw', 0), b.get('D1mr', 0) + b.get('D1mw', 0))
    print('cachegrind, 4 KiB randwrite (the null device drops writes without touching the data;')
    print('  its reads would memset 4 KiB per I/O and evict the D1 for reasons a DMA device does not have):')
    print(f'D1 misses per I/O, whole process           : {dm(c1, c2):.4f}')
    eng = lambda f: {'D1mr': sum(v.get('D1mr', 0) for k, v in f.items() if klass(k) == 'engine'),
                     'D1mw': sum(v.get('D1mw', 0) for k, v in f.items() if klass(k) == 'engine')}
    print(f'D1 misses per I/O in engine functions      : {dm(eng(f1), eng(f2)):.4f}')
    rows = []
    for k in set(f1) | set(f2):
        if klass(k) == 'engine':
            a, b = f1.get(k, {}), f2.get(k, {})
            rows.append((dm(a, b), per(a.get('D1mr', 0), b.get('D1mr', 0)), per(a.get('D1mw', 0), b.get('D1mw', 0)), k))
    for v, r, w, k in sorted(rows, reverse=True)[:5]:
        if v < 0.005: break
        print(f'  {v:6.3f} (read {r:.3f}, write {w:.3f})  {k}')
else:
    print('cachegrind: no D1 figures parsed')
PY
echo "qpair layout (gdb ptype /o, hot part):" | tee -a "$TMP/report"
sed 's/^/  /' "$TMP/layout" | tee -a "$TMP/report"
echo "fields beyond the first line that the I/O path touches too (plus the statistics block):" | tee -a "$TMP/report"
sed 's/^/  /' "$TMP/coldhot" | tee -a "$TMP/report"
[ -z "$OUT" ] || cp "$TMP/report" "$OUT"
