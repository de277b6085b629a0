#!/bin/sh
# t-perf.sh - nvmefs-perf drives the engine over the software controller:
# randrw with --verify on a RAM namespace (inline and threaded device, poll
# and interrupt mode) finds no mismatch and reads back what it wrote; --verify
# on a null namespace (which keeps no data) must report mismatches and fail;
# --json carries the documented keys; -n runs exactly that many I/Os; bad
# usage exits 2.
# transport-independent: nvmefs-perf drives the engine; nothing is mounted
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
PERF=$BUILD/nvmefs-perf
[ -x "$PERF" ] || { echo "FAIL: $PERF does not exist (make)"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAIL=0
fail() { echo "FAIL: $*"; FAIL=1; }
# a hung engine or device fails the test instead of stalling the suite
perf() { timeout 60 "$PERF" "$@"; }

NCPU=$(getconf _NPROCESSORS_ONLN)
if [ "$NCPU" -ge 2 ]; then Q=2 CPUS=0,1; else Q=1 CPUS=0; fi

conf() { # file exec mode backing
	cat > "$1" <<CONF
[daemon]
log_level = warn
[engine]
queues = $Q
cpus = $CPUS
mode = $3
queue_depth = 64
cq_budget = 16
[controller nvme0]
device = sim
namespaces = 1
size = 16M
block_size = 4096
backing = $4
exec = $2
CONF
}

# randrw --verify: every read is checked against the block's last write
for combo in inline:poll thread:poll thread:interrupt; do
	ex=${combo%:*} mode=${combo#*:}
	c=$TMP/$ex-$mode.conf
	conf "$c" "$ex" "$mode" ram
	perf -c "$c" -w randrw -M 50 -s 4096 -q 16 -t 2 --verify > "$TMP/out" 2> "$TMP/err"
	rc=$?
	cat "$TMP/out" "$TMP/err"
	[ $rc = 0 ] || fail "randrw --verify ($ex, $mode) exited $rc"
	line=$(grep '^verify:' "$TMP/out")
	checked=$(echo "$line" | sed -n 's/^verify: \([0-9]*\) reads checked, \([0-9]*\) mismatches$/\1/p')
	bad=$(echo "$line" | sed -n 's/^verify: \([0-9]*\) reads checked, \([0-9]*\) mismatches$/\2/p')
	[ -n "$checked" ] && [ "$checked" -gt 0 ] || fail "$ex/$mode: no read was verified ($line)"
	[ "$bad" = 0 ] || fail "$ex/$mode: $bad mismatches"
	errs=$(awk '$1 == "total" { print $13 }' "$TMP/out")
	[ "$errs" = 0 ] || fail "$ex/$mode: $errs I/O errors"
done

# sequential write then read workloads verify too (fill pass + generations)
c=$TMP/inline-poll.conf
perf -c "$c" -w read -s 8192 -q 8 -n 20000 --verify > "$TMP/out" 2>&1 ||
	{ cat "$TMP/out"; fail "read --verify with 8 KiB I/Os failed"; }
grep -q '^verify: 20000 reads checked, 0 mismatches$' "$TMP/out" ||
	{ cat "$TMP/out"; fail "read --verify: expected 20000 reads checked"; }

# the check can fail: a null namespace keeps nothing, so reads mismatch
conf "$TMP/null.conf" inline poll null
perf -c "$TMP/null.conf" -w randrw -q 8 -n 5000 --verify > "$TMP/out" 2>&1
rc=$?
[ $rc = 1 ] || { cat "$TMP/out"; fail "--verify on a null namespace exited $rc, expected 1"; }
grep -Eq '^verify: [0-9]+ reads checked, [1-9][0-9]* mismatches$' "$TMP/out" ||
	{ cat "$TMP/out"; fail "--verify on a null namespace reported no mismatch"; }

# --json: keys and a positive count
perf -c "$c" -w randread -q 16 -t 1 --json > "$TMP/j" 2> "$TMP/err" || fail "--json run failed: $(cat "$TMP/err")"
python3 - "$TMP/j" "$Q" <<'PY' || fail "--json output is wrong"
import json, sys
j = json.load(open(sys.argv[1]))
want = ["ios", "iops", "mib_s", "lat_us", "cpl_per_pass", "doorbells_per_io", "errors"]
for part in [j["total"]] + j["reactors"]:
    missing = [k for k in want if k not in part] + [k for k in ["avg", "p50", "p99", "p999", "max"] if k not in part["lat_us"]]
    assert not missing, f"missing keys {missing}"
assert "config" in j and j["config"]["workload"] == "randread", j.get("config")
assert j["total"]["ios"] > 0, j["total"]
assert len(j["reactors"]) == int(sys.argv[2]), len(j["reactors"])
assert sum(r["ios"] for r in j["reactors"]) == j["total"]["ios"]
assert j["total"]["errors"] == 0
assert 0 < j["total"]["lat_us"]["p50"] <= j["total"]["lat_us"]["p99"] <= j["total"]["lat_us"]["max"], j["total"]["lat_us"]
assert j["total"]["doorbells_per_io"] > 0 and j["total"]["cpl_per_pass"] > 0
print("json ok:", j["total"]["ios"], "I/Os")
PY

# -n: exactly N I/Os over all reactors, also when N does not divide evenly
for n in 12345 7; do
	perf -c "$c" -w randrw -q 16 -n $n --json > "$TMP/j" 2> "$TMP/err" || fail "-n $n failed: $(cat "$TMP/err")"
	got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total"]["ios"])' "$TMP/j")
	[ "$got" = $n ] || fail "-n $n ran $got I/Os"
done

# usage errors exit 2 with a message
for args in "-w sideways" "-q 0" "-s 1000" "-t 1 -n 5" "-M 101" "-t 0" "--bogus"; do
	# shellcheck disable=SC2086
	perf -c "$c" $args > /dev/null 2> "$TMP/err"
	rc=$?
	[ $rc = 2 ] && [ -s "$TMP/err" ] || fail "'$args' exited $rc (expected 2 with a message)"
done
perf > /dev/null 2>&1; [ $? = 2 ] || fail "no -c must exit 2"
perf -c "$TMP/none.conf" > /dev/null 2>&1; [ $? = 2 ] || fail "a missing config must exit 2"

[ $FAIL = 0 ] && echo "PASS: t-perf"
exit $FAIL
