#!/bin/sh
# t-config.sh - nvmefsd --check-config on every example in tests/config, the
# shipped etc/nvmefs.conf, and the command-line options.
#   NAME.conf with NAME.expect: exit 78, exactly the expected lines on stderr
#   (@ONLINE@ stands for this machine's online CPU list), nothing on stdout.
#   valid-*.conf: exit 0, nothing on stderr, and the printed effective config
#   passes --check-config itself and prints the same settings again.
# transport-independent: nvmefsd --check-config and its options; nothing is mounted
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
D=$BUILD/nvmefsd
# NVMEFS_STRACE_DIR: traced as in lib.sh (ExecStartPre= runs --check-config)
[ -z "${NVMEFS_STRACE_DIR:-}" ] || D=$(. "$ROOT/tests/integration/lib.sh" && echo "$D")
[ -x "$D" ] || { echo "no $D: build it first"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ONLINE=$(cat /sys/devices/system/cpu/online)
VERSION=$(head -n 1 "$ROOT/debian/changelog" | cut -d ' ' -f 2 | tr -d '()')
fails=0 n=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# the effective config without its first line (which names the input file)
settings() { tail -n +2 "$1"; }

cd "$ROOT/tests/config" || exit 1
for f in *.conf; do
	n=$((n + 1))
	name=${f%.conf}
	"$D" --check-config -c "$f" > "$TMP/out" 2> "$TMP/err"
	rc=$?
	if [ -f "$name.expect" ]; then
		sed "s/@ONLINE@/$ONLINE/g" "$name.expect" > "$TMP/want"
		[ $rc = 78 ] || fail "$f: exit $rc, want 78"
		cmp -s "$TMP/err" "$TMP/want" ||
			{ fail "$f: stderr differs"; diff "$TMP/want" "$TMP/err"; }
		[ -s "$TMP/out" ] && fail "$f: printed a config although invalid"
	else
		case $name in valid-*) ;; *) fail "$f: neither valid-* nor with a .expect" ;; esac
		[ $rc = 0 ] || fail "$f: exit $rc, want 0"
		[ -s "$TMP/err" ] && { fail "$f: errors on a valid file"; cat "$TMP/err"; }
		cp "$TMP/out" "$TMP/effective.conf"
		"$D" --check-config -c "$TMP/effective.conf" > "$TMP/out2" 2> "$TMP/err2" ||
			{ fail "$f: its effective config does not pass"; cat "$TMP/err2"; }
		settings "$TMP/out" > "$TMP/a"
		settings "$TMP/out2" > "$TMP/b"
		cmp -s "$TMP/a" "$TMP/b" ||
			{ fail "$f: effective config changes on reload"; diff "$TMP/a" "$TMP/b"; }
	fi
done
[ $n -ge 20 ] || fail "only $n example files"
echo "$n example files checked"

cd "$ROOT"
"$D" --check-config -c etc/nvmefs.conf > "$TMP/out" 2> "$TMP/err" ||
	{ fail "etc/nvmefs.conf: exit $?"; cat "$TMP/err"; }
grep -qx 'device = sim' "$TMP/out" || fail "etc/nvmefs.conf: no sim controller printed"

"$D" --check-config -c "$TMP/missing.conf" > "$TMP/out" 2> "$TMP/err"
rc=$?
[ $rc = 78 ] || fail "missing file: exit $rc, want 78"
grep -q "^$TMP/missing.conf: cannot open: No such file or directory$" "$TMP/err" ||
	fail "missing file: message: $(cat "$TMP/err")"

for h in -h --help; do
	"$D" $h > "$TMP/out" 2> "$TMP/err"
	rc=$?
	[ $rc = 0 ] || fail "$h: exit $rc"
	grep -q '^usage: nvmefsd' "$TMP/out" || fail "$h: no usage on stdout"
	grep -q -- '--check-config' "$TMP/out" || fail "$h: --check-config not described"
	[ -s "$TMP/err" ] && fail "$h: wrote to stderr"
done

for v in -V --version; do
	out=$("$D" $v)
	rc=$?
	[ $rc = 0 ] || fail "$v: exit $rc"
	[ "$out" = "nvmefsd $VERSION" ] || fail "$v: printed '$out', want 'nvmefsd $VERSION'"
done

for bad in --no-such-option -x "-c" "stray-argument"; do
	"$D" $bad > "$TMP/out" 2> "$TMP/err"
	rc=$?
	[ $rc = 2 ] || fail "'$bad': exit $rc, want 2"
	grep -q '^usage: nvmefsd' "$TMP/err" || fail "'$bad': no usage on stderr"
	[ -s "$TMP/out" ] && fail "'$bad': wrote to stdout"
done

# --has-controllers (the unit's ExecCondition=): 1 with the reason for a
# config that validly names no controller, 0 for one that names one and,
# silently, for one that does not load (the start reports that)
E=$ROOT/tests/config/valid-no-controller.conf
"$D" --has-controllers -c "$E" > "$TMP/out" 2> "$TMP/err"
rc=$?
[ $rc = 1 ] || fail "--has-controllers without a controller: exit $rc, want 1"
grep -q "^no controllers configured in $E (allow_no_controller = yes): nothing to serve" "$TMP/err" ||
	fail "--has-controllers: no reason on stderr: $(cat "$TMP/err")"
"$D" --has-controllers -c "$ROOT/tests/config/valid-minimal.conf" > "$TMP/out" 2>&1 ||
	fail "--has-controllers with a controller: exit $?"
"$D" --has-controllers -c "$ROOT/tests/config/no-controller.conf" > "$TMP/out" 2>&1 ||
	fail "--has-controllers with an invalid config: exit $?, want 0 (the start reports it)"
[ -s "$TMP/out" ] && fail "--has-controllers with an invalid config printed: $(cat "$TMP/out")"
# started by hand on such a config, the daemon says so and exits 78
"$D" -f -c "$E" > "$TMP/out" 2> "$TMP/err"
rc=$?
[ $rc = 78 ] || fail "nvmefsd without a controller: exit $rc, want 78"
grep -q "no controllers configured in $E: nothing to serve" "$TMP/err" ||
	fail "nvmefsd without a controller: $(cat "$TMP/err")"

[ $fails = 0 ] || { echo "$fails failures"; exit 1; }
echo "config checks passed"
