"""promseries.py - what a Prometheus text exposition (nvmefsctl metrics)
holds, for the tests that check a dashboard or alert rules against it
(t-grafana, t-alert-rules): series(path) maps each metric name to the set
of label names seen on it."""
import re


def series(path):
    seen = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?', line)
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        seen.setdefault(m.group(1), set()).update(labels)
    return seen
