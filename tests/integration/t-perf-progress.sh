#!/bin/sh
# t-perf-progress.sh - nvmefs-perf's progress line: on a terminal (a pty from
# util-linux script) stderr gets one line rewritten in place ("\r...ESC[K")
# for the --verify fill pass and for the measured phase (by time with -t, by
# I/Os with -n), each with a percentage, erased before the report; it never
# wraps (cut to the terminal's width); with stderr not a terminal nothing of
# it is written, and stdout (the table or --json) never carries it.
# transport-independent: nvmefs-perf drives the engine; nothing is mounted
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
PERF=$BUILD/nvmefs-perf
[ -x "$PERF" ] || { echo "FAIL: $PERF does not exist (make)"; exit 1; }
command -v script >/dev/null || { echo "SKIP: no script (util-linux)"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAIL=0
fail() { echo "FAIL: $*"; FAIL=1; }
CR=$(printf '\r')
ESC=$(printf '\033')

# a RAM namespace whose fill pass takes a second or two on the software
# controller (it is slowed by first touches of the namespace's memory)
cat > "$TMP/c.conf" <<EOF
[daemon]
log_level = warn
[engine]
queues = 1
cpus = 0
mode = poll
queue_depth = 64
cq_budget = 16
[controller nvme0]
device = sim
namespaces = 1
size = 48M
block_size = 4096
backing = ram
exec = thread
EOF
# on_tty OUT CMD: run CMD on a pty, what the terminal got into OUT; the
# command's own exit status
on_tty() {
	out=$1
	shift
	timeout 60 script -qec "$*" /dev/null < /dev/null > "$out"
}
# the progress lines: the text between carriage returns, escape sequences out
lines() { tr '\r' '\n' < "$1" | sed "s/${ESC}\[K//g"; }

# 1. --verify on a terminal: the fill pass and the measured phase (-t)
on_tty "$TMP/tty1" "'$PERF' -c '$TMP/c.conf' -w randrw -q 16 -t 1.5 --verify" ||
	fail "--verify on a pty exited $?"
lines "$TMP/tty1" > "$TMP/l1"
grep -Eq '^fill: [0-9]+% [0-9.]+ [KMG]iB/48 MiB, [0-9.]+ [KMG]iB/s, eta [0-9]+ s$' "$TMP/l1" ||
	fail "no fill progress line: $(head -c 400 "$TMP/l1")"
grep -Eq '^randrw verify: [0-9]+% [0-9.]+ s/1.5 s, [0-9.]+ [KMG]iB/s, [0-9]+ IOPS, eta [0-9]+ s$' "$TMP/l1" ||
	fail "no progress line for the measured phase: $(tail -c 400 "$TMP/l1")"
n=$(grep -Ec '^(fill|randrw verify): [0-9]+%' "$TMP/l1")
[ "$n" -ge 3 ] || fail "the line was written $n times, want a few a second"
# percentages never go down within a phase
for ph in fill 'randrw verify'; do
	grep "^$ph: " "$TMP/l1" | sed -E 's/^[^:]*: ([0-9]+)%.*/\1/' |
		awk 'NR > 1 && $1 < p { bad = 1 } { p = $1 } END { exit bad }' ||
		fail "$ph: the percentage went down"
done
# erased before the report: the report's first line follows CR ESC[K
grep -q "${CR}${ESC}\[Knvmefs-perf: randrw bs=4096" "$TMP/tty1" ||
	fail "the line was not erased before the report"
grep -q '^verify: [0-9]* reads checked, 0 mismatches' "$TMP/l1" || fail "no verify summary on the pty"

# 2. -n on a terminal: I/Os done of the count; stdout to a file: --json
# alone there, the line on the terminal (stderr)
on_tty "$TMP/tty2" "'$PERF' -c '$TMP/c.conf' -w randread -q 32 -n 600k --json > '$TMP/j2'" ||
	fail "-n --json on a pty exited $?"
lines "$TMP/tty2" > "$TMP/l2"
grep -Eq '^randread: [0-9]+% [0-9.]+ [KMG]iB/2.3 GiB, [0-9.]+ [KMG]iB/s, [0-9]+ IOPS, eta [0-9]+ s$' "$TMP/l2" ||
	fail "no -n progress line: $(head -c 400 "$TMP/l2")"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["total"]["ios"] == 600000' "$TMP/j2" ||
	fail "stdout is not the JSON report alone: $(head -c 300 "$TMP/j2")"

# 3. a narrow terminal: the line is cut to the width, never wrapped
on_tty "$TMP/tty3" "stty cols 30; '$PERF' -c '$TMP/c.conf' -w randread -q 16 -t 1" ||
	fail "-t 1 on a 30-column pty exited $?"
lines "$TMP/tty3" | grep -E '^randread: [0-9]+%' > "$TMP/l3"
[ -s "$TMP/l3" ] || fail "no progress line on a 30-column terminal"
awk 'length($0) > 29 { print; bad = 1 } END { exit bad }' "$TMP/l3" ||
	fail "a progress line is wider than the 30-column terminal"

# 4. not a terminal: stdout and stderr to a pipe, then stderr to a file
# with stdout on the pty; no line, no carriage return, no escape anywhere
timeout 60 "$PERF" -c "$TMP/c.conf" -w randrw -q 16 -t 1.5 --verify 2>&1 | cat > "$TMP/pipe"
grep -q '^verify: [0-9]* reads checked, 0 mismatches$' "$TMP/pipe" || fail "piped run: no verify summary"
if grep -q "$CR\|$ESC" "$TMP/pipe" || grep -Eq '(fill|randrw verify): [0-9]+%' "$TMP/pipe"; then
	fail "progress written to a pipe: $(head -c 300 "$TMP/pipe" | od -c | head -n 5)"
fi
on_tty "$TMP/tty4" "'$PERF' -c '$TMP/c.conf' -w randread -q 16 -t 1 2> '$TMP/err4'" ||
	fail "stderr to a file exited $?"
[ ! -s "$TMP/err4" ] || fail "stderr (a file) got: $(head -c 300 "$TMP/err4" | od -c | head -n 5)"
grep -Eq 'randread: [0-9]+%' "$TMP/tty4" && fail "progress on stdout when stderr is not a terminal"
grep -q '^total ' "$TMP/tty4" || fail "no report on stdout"

[ $FAIL = 0 ] && echo "all checks passed"
exit $FAIL
