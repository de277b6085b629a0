#!/bin/sh
# t-cli-layout.sh - nvmefsctl's tables with long names and many namespaces:
# a 16-character controller with 12 namespaces beside a short one.
#   - top (plain), stats, namespaces, list, status, queues, iostat: every
#     column lines up with its header whatever the names' lengths;
#   - top lists the namespaces in natural order (n2 before n10);
#   - top within 80 columns ($COLUMNS in plain mode, the screen's width on a
#     terminal) leaves whole columns out and names them under the table;
#   - iostat -y leaves the report since start out, -t puts the time before
#     each report, NAMEs choose the namespaces (in that order), an unknown
#     NAME is an error;
#   - queues in hybrid mode says the queues have no interrupt vector.
# transport-independent: nvmefsctl's tables over the admin socket
. "$(dirname "$0")/lib.sh"
lib_init
CTL=$BUILD/nvmefsctl
L=a-long-ctrl-name # 16 characters, the most a controller's name may have
conf_sim "$L" 1M namespaces=12 backing=ram -- c2 1M namespaces=2 backing=ram
daemon_start ${L}n1 ${L}n12 c2n2 || { fail "start"; finish; }
ctl() { "$CTL" -s "$TMP/admin.sock" "$@"; }
dd if=/dev/urandom of="$MNT/${L}n10" bs=4k count=8 oflag=direct conv=notrunc status=none

# aligned FILE HEADER-REGEX ALIGN: the table whose header line matches
# HEADER-REGEX, up to the next blank line (or a "(...)" note), has each
# column (ALIGN: one L or R per header word) left- or right-aligned under
# its header word in every row, or empty there
aligned() {
	python3 - "$@" <<'PY'
import re, sys
path, head_re, align = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(path).read().split("\n")
heads = [i for i, l in enumerate(lines) if re.search(head_re, l)]
if not heads:
    print("FAIL: no header matching %r in %s" % (head_re, path)); sys.exit(1)
bad = 0
for h in heads:
    head = lines[h]
    cols = [(m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*" if "  " in head else r"\S+", head)]
    if len(cols) != len(align):
        # headers with one space inside a name ("FW Rev"): split on single spaces, join by hand
        cols = [(m.start(), m.end()) for m in re.finditer(r"\S+", head)]
    if len(cols) != len(align):
        print("FAIL: %d header columns, %d alignments: %r" % (len(cols), len(align), head)); sys.exit(1)
    rows = 0
    for l in lines[h + 1:]:
        if not l.strip() or l.startswith("("):
            break
        rows += 1
        for (s, e), a in zip(cols, align):
            if l[s:e].strip() == "" and (s == 0 or l[s - 1:s] in ("", " ")):
                ok = True  # an empty cell (the total row's controller)
            elif a == "L":
                ok = s < len(l) and l[s] != " " and (s == 0 or l[s - 1] == " ")
            else:
                ok = e <= len(l) and l[e - 1] != " " and (e == len(l) or l[e] == " ")
            if not ok:
                print("FAIL: column %r (%s) off in: %r\n      header: %r" % (head[s:e], a, l, head))
                bad += 1
                break
    if rows == 0:
        print("FAIL: no rows under %r" % head); bad += 1
sys.exit(1 if bad else 0)
PY
}

# ---- top, plain: alignment and natural order ----
ctl top 0.2 2 > "$TMP/top" || fail "top"
aligned "$TMP/top" '^NAMESPACE ' LLRRRRRRRRRRR || fail "top: namespaces table"
aligned "$TMP/top" '^REACTOR ' LRRRRRRR || fail "top: reactors table"
aligned "$TMP/top" '^CONTROLLER ' LLRRRR || fail "top: controllers table"
order=$(awk '/^NAMESPACE /{f++} f == 2 && $1 ~ /n[0-9]+$/ {print $1}' "$TMP/top" | tr '\n' ' ')
want=""
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do want="$want${L}n$i "; done
want="${want}c2n1 c2n2 "
[ "$order" = "$want" ] || fail "top: namespaces in the order '$order', want '$want'"
grep -q "hidden at" "$TMP/top" && fail "top without a width limit hid columns"

# ---- top within 80 columns ----
COLUMNS=80 ctl top 0.2 1 > "$TMP/top80" || fail "top (80 columns)"
awk 'length($0) > 80 { print "FAIL: line of " length($0) " columns: " $0; f = 1 } END { exit f }' \
	"$TMP/top80" || fail "top within 80 columns printed a longer line"
grep -Eq '^\([0-9]+ columns? hidden at 80 columns: [^)]+; widen the COLUMNS\)$' "$TMP/top80" ||
	fail "top within 80 columns: no line naming the hidden columns: $(cat "$TMP/top80")"
grep -q "^${L}n10 " "$TMP/top80" || fail "top within 80 columns: no namespace row"
head80=$(grep '^NAMESPACE ' "$TMP/top80")
for c in r/s w/s r_p99 w_p99 QD %util; do
	echo "$head80" | grep -q " $c\( \|$\)" || fail "top within 80 columns left out $c: $head80"
done
echo "ok: top at 80 columns: $head80 / $(grep hidden "$TMP/top80" | head -1)"
# on a terminal 80 columns wide
if command -v script > /dev/null; then
	TERM=xterm COLUMNS= script -qec "stty cols 80 rows 60; $CTL -s $TMP/admin.sock top 0.3 1" \
		/dev/null > "$TMP/tty" 2>&1 || fail "top on a terminal"
	grep -q "hidden at 80 columns" "$TMP/tty" || fail "top on an 80-column terminal: no sign of hidden columns"
fi

# ---- the other tables ----
ctl namespaces > "$TMP/ns" || fail "namespaces"
aligned "$TMP/ns" '^NAME ' LLLRRRL || fail "namespaces table"
ctl list > "$TMP/list" || fail "list"
# "FW Rev" is one column: check the ones around it
aligned "$TMP/list" '^Node ' LLLLLRRLLLLL > /dev/null 2>&1 ||
	python3 - "$TMP/list" <<'PY' || fail "list table"
import sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.strip()]
head = lines[0]
for name in ("SN", "Model", "Format", "FW Rev", "State", "Transport"):
    s = head.index(name)
    for l in lines[1:]:
        if l[s - 1] != " " or l[s] == " ":
            print("FAIL: list: %s not under its header: %r / %r" % (name, l, head)); sys.exit(1)
PY
ctl stats > "$TMP/stats" || fail "stats"
aligned "$TMP/stats" '^REACTOR +CONTROLLER +QID +SUBMITTED' LLRRRRRRRRRRRRRRR || fail "stats: queue pairs"
aligned "$TMP/stats" '^CONTROLLER +STATE +TIMEOUTS' LLRRRRRRRRRRRRRR || fail "stats: recovery"
aligned "$TMP/stats" '^REACTOR +CONTROLLER +QID +TIMEOUTS' LLRRRRRR || fail "stats: recovery per queue"
python3 - "$TMP/stats" "$L" <<'PY' || fail "stats: namespaces table"
import sys
lines = open(sys.argv[1]).read().split("\n")
h = [i for i, l in enumerate(lines) if l.startswith("NAMESPACE ")][0]
head = lines[h]
op, cnt = head.index(" OP ") + 1, head.index(" COUNT") + len(" COUNT")
for l in lines[h + 1:]:
    if not l.strip():
        break
    if l[op] == " " or l[op - 1] != " " or l[cnt - 1] == " ":
        print("FAIL: stats namespaces row off: %r / %r" % (l, head)); sys.exit(1)
PY
ctl status > "$TMP/status" || fail "status"
aligned "$TMP/status" '^CONTROLLER +STATE +DEVICE' LLLLLRRL || fail "status: controllers"
ctl queues > "$TMP/queues" || fail "queues"
aligned "$TMP/queues" '^REACTOR +CPU' LRRLRRRR || fail "queues table"
grep -q "^mode hybrid: polled while commands are in flight, asleep when none are (no interrupt needed); interrupt vectors on 0 of 2 I/O queues$" "$TMP/queues" ||
	fail "queues: mode line: $(head -1 "$TMP/queues")"
ctl iostat -x > "$TMP/iostat" || fail "iostat -x"
aligned "$TMP/iostat" '^Device ' LRRRRRRRRRRRRRRRRR || fail "iostat -x table"

# ---- iostat -y, -t, NAMEs ----
ctl iostat -y -t c2n2 ${L}n10 0.2 2 > "$TMP/io" || fail "iostat -y -t NAMEs"
[ "$(grep -c '^Device ' "$TMP/io")" = 2 ] || fail "iostat -y 0.2 2: $(grep -c '^Device ' "$TMP/io") reports, want 2"
[ "$(grep -Ec '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{4}$' "$TMP/io")" = 2 ] ||
	fail "iostat -t: no time before each report: $(cat "$TMP/io")"
rows=$(awk '$1 !~ /^(Device|[0-9])/ && NF > 1 { print $1 }' "$TMP/io" | tr '\n' ' ')
[ "$rows" = "c2n2 ${L}n10 c2n2 ${L}n10 " ] || fail "iostat NAMEs: rows '$rows'"
# the write above is in the report since start only: -y leaves it out
awk -v n="${L}n10" '$1 == n && $3 != "0.00" { f = 1 } END { exit f }' "$TMP/io" ||
	fail "iostat -y: a report counted the writes before it: $(cat "$TMP/io")"
ctl iostat ${L}n10 > "$TMP/io1" || fail "iostat NAME"
awk -v n="${L}n10" '$1 == n && $3 != "0.00" { f = 1 } END { exit !f }' "$TMP/io1" ||
	fail "iostat NAME: the report since start has no writes: $(cat "$TMP/io1")"
[ "$(ctl iostat -y c2n1 | grep -c '^Device ')" = 1 ] || fail "iostat -y without an interval: not one report"
n=$(ctl --json iostat -y c2n1 0.2 1 | python3 -c 'import json, sys
r = [json.loads(l) for l in sys.stdin if l.strip()]
print(len(r), r[0]["since_start"], [x["name"] for x in r[0]["namespaces"]])')
[ "$n" = "1 False ['c2n1']" ] || fail "iostat --json -y NAME: $n"
ctl iostat nosuchn1 > "$TMP/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "iostat of an unknown namespace: exit $rc, want 1"
grep -q "iostat: no namespace 'nosuchn1'; the daemon serves: ${L}n1 " "$TMP/out" ||
	fail "iostat of an unknown namespace: $(cat "$TMP/out")"
ctl -y status > /dev/null 2>&1
[ $? = 2 ] || fail "-y with status was taken"

daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"
finish
