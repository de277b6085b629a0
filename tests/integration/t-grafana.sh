#!/bin/sh
# t-grafana.sh - contrib/grafana/nvmefs.json against a running daemon: every
# metric its queries name is in nvmefsctl metrics (after I/O and a SMART
# read), every label they group by or show in a legend is on those series
# (or is one the scrape adds: instance, job), and promtool parses every
# query (each as a recording rule).
# transport-independent: the dashboard against the metrics the admin socket serves
. "$(dirname "$0")/lib.sh"
lib_init
command -v promtool > /dev/null || fail "promtool is not installed (scripts/deps.sh test installs it)"
DASH=$ROOT/contrib/grafana/nvmefs.json
conf_sim nvme0 16M backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
dd if=/dev/urandom of="$MNT/nvme0n1" bs=64k count=16 oflag=direct conv=notrunc status=none || fail "write"
dd if="$MNT/nvme0n1" of=/dev/null bs=64k count=16 iflag=direct status=none || fail "read"
ctl smart-log nvme0 > /dev/null || fail "smart-log"
ctl metrics > "$TMP/metrics" || fail "metrics"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$ROOT/tests/integration" python3 - "$DASH" "$TMP/metrics" "$TMP/rules.yml" <<'PY' || fail "dashboard"
import json, re, sys
dash = json.load(open(sys.argv[1]))
from promseries import series as read_series
series = read_series(sys.argv[2])
exprs = []
def walk(panels):
    for p in panels:
        for t in p.get("targets", []):
            exprs.append((p["title"], t["expr"], t.get("legendFormat", "")))
        walk(p.get("panels", []))
walk(dash["panels"])
for a in dash.get("annotations", {}).get("list", []):
    if "expr" in a:
        exprs.append((a["name"], a["expr"], ""))
bad = 0
rules = []
for title, e, legend in exprs:
    q = e.replace("$__rate_interval", "1m").replace("$instance", ".*")
    names = set(re.findall(r'\b(nvmefs_[a-z0-9_]+)\b', q))
    if not names:
        print("%s: no nvmefs metric in %s" % (title, e)); bad += 1
    have = {"instance", "job"}
    for n in names:
        if n not in series:
            print("%s: %s is not in nvmefsctl metrics" % (title, n)); bad += 1
        else:
            have |= series[n]
    used = set()
    for grp in re.findall(r'\bby \(([^)]*)\)', q):
        used |= {l.strip() for l in grp.split(",")}
    used |= set(re.findall(r'\{\{\s*([a-zA-Z_]+)\s*\}\}', legend))
    for l in sorted(used - have):
        print("%s: label %s is not on %s" % (title, l, ", ".join(sorted(names)))); bad += 1
    rules.append(q)
with open(sys.argv[3], "w") as f:
    f.write("groups:\n- name: dashboard\n  rules:\n")
    for i, q in enumerate(rules):
        f.write("  - record: nvmefs:dashboard_query_%d\n    expr: %s\n" % (i, json.dumps(q)))
print("%d queries, %d metrics named" % (len(exprs), len({n for _, e, _ in exprs
      for n in re.findall(r'\b(nvmefs_[a-z0-9_]+)\b', e)})))
sys.exit(1 if bad or len(exprs) < 20 else 0)
PY
promtool check rules "$TMP/rules.yml" > "$TMP/lint" 2>&1 || fail "promtool check rules: $(cat "$TMP/lint")"
daemon_stop
finish
