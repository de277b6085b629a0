#!/bin/sh
# t-alert-rules.sh - contrib/prometheus/nvmefs-alerts.yml: promtool accepts
# it (check rules), each alert fires where it should and not elsewhere
# (promtool test rules, tests/prometheus/nvmefs-alerts.test.yml), and every
# nvmefs metric it names is in a running daemon's nvmefsctl metrics with the
# labels it uses (by (...), {{ $labels.X }}, matchers), besides those the
# scrape adds (instance, job).
# transport-independent: the rules against the metrics the admin socket serves
. "$(dirname "$0")/lib.sh"
lib_init
command -v promtool > /dev/null || fail "promtool is not installed (scripts/deps.sh test installs it)"
RULES=$ROOT/contrib/prometheus/nvmefs-alerts.yml
promtool check rules "$RULES" > "$TMP/lint" 2>&1 || fail "promtool check rules: $(cat "$TMP/lint")"
promtool test rules "$ROOT/tests/prometheus/nvmefs-alerts.test.yml" > "$TMP/test" 2>&1 ||
	fail "promtool test rules: $(cat "$TMP/test")"
conf_sim nvme0 16M backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
dd if=/dev/urandom of="$MNT/nvme0n1" bs=64k count=4 oflag=direct conv=notrunc status=none || fail "write"
ctl smart-log nvme0 > /dev/null || fail "smart-log"
ctl metrics > "$TMP/metrics" || fail "metrics"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$ROOT/tests/integration" python3 - "$RULES" "$TMP/metrics" <<'PY' || fail "the rules name metrics or labels the daemon does not have"
import re, sys
from promseries import series as read_series
series = read_series(sys.argv[2])
# the rules file is simple YAML: each rule's expr and annotations on lines
# of their own, rules separated by "- alert:"
text = open(sys.argv[1]).read()
bad = alerts = 0
for rule in re.split(r'\n\s*- alert: ', text)[1:]:
    alerts += 1
    name = rule.split("\n", 1)[0].strip()
    expr = re.search(r'\n\s*expr: (.*)', rule).group(1)
    names = set(re.findall(r'\b(nvmefs_[a-z0-9_]+)\b', expr))
    have = {"instance", "job"}
    for n in names:
        if n not in series:
            print("%s: %s is not in nvmefsctl metrics" % (name, n)); bad += 1
        else:
            have |= series[n]
    if not names:
        have |= {"file"}  # node_exporter's node_textfile_mtime_seconds
    used = set()
    for grp in re.findall(r'\bby \(([^)]*)\)', expr):
        used |= {l.strip() for l in grp.split(",")}
    used |= set(re.findall(r'\{([a-z_]+)=~?"', expr))
    used |= set(re.findall(r'\$labels\.([a-zA-Z_]+)', rule))
    for l in sorted(used - have):
        print("%s: label %s is not on %s" % (name, l, ", ".join(sorted(names)) or "its series")); bad += 1
print("%d alerts, %d nvmefs metrics named" % (alerts, len(set(re.findall(r'\b(nvmefs_[a-z0-9_]+)\b', text)))))
sys.exit(1 if bad or alerts < 10 else 0)
PY
daemon_stop
finish
