#!/bin/sh
# t-docs.sh - the help texts, the man pages and the programs agree:
#   - nvmefsd --help and nvmefsd(8) (SYNOPSIS, OPTIONS) name the same
#     options; so do nvmefsctl --help and nvmefsctl(8);
#   - the exit statuses: nvmefsd(8) and nvmefsctl(8) list those the programs
#     return (usage 2, an invalid config 78 with --check-config, help 0;
#     nvmefsctl: unknown command 2, no daemon 3), and each --help's
#     "Exit status:" says the same as its man page (nvmefsd's, also of
#     --check-config and -f);
#   - the commands operator_group may run are the same in nvmefs.conf(5),
#     nvmefsctl(8), etc/nvmefs.conf and docs/operations.md (the daemon's
#     side is t-admin-users.sh's);
#   - vfio-bind is named as installed (make install: SBINDIR/vfio-bind) in
#     the man pages and nvmefsctl --help, not by its place in the source.
# No daemon, no root.
# transport-independent: help texts and man pages; nothing is mounted
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
D=$BUILD/nvmefsd C=$BUILD/nvmefsctl M=$ROOT/docs/man
[ -x "$D" ] && [ -x "$C" ] || { echo "FAIL: build nvmefsd and nvmefsctl first"; exit 1; }
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

# opts_help PROGRAM: the options its --help names, one a line, sorted
opts_help() {
	# (nvmefsctl's help names vfio-bind's --unbind: not its own)
	"$1" --help | grep -v 'vfio-bind' | grep -oE '(^|[ [(,])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[ [(,]//' | sort -u
}
# opts_man PAGE: the options its SYNOPSIS and OPTIONS sections name
opts_man() {
	python3 - "$1" <<'PY'
import re, sys
text, keep, out = open(sys.argv[1]).read().split("\n"), False, set()
for l in text:
    if l.startswith(".SH"):
        keep = l.split()[1].strip('"') in ("SYNOPSIS", "OPTIONS")
        continue
    if keep:
        l = l.replace("\\-", "-").replace("\\fB", "").replace("\\fP", "").replace("\\fI", "")
        out.update(m.group(1) for m in re.finditer(r"(?:^|[ \[(,|])(--?[a-zA-Z][a-zA-Z-]*)", l))
print("\n".join(sorted(out)))
PY
}
for p in nvmefsd:$D nvmefsctl:$C; do
	name=${p%%:*} bin=${p#*:}
	opts_help "$bin" > "$TMP/help"
	opts_man "$M/$name.8" > "$TMP/man"
	[ "$(wc -l < "$TMP/help")" -ge 8 ] || fail "$name --help: only $(tr '\n' ' ' < "$TMP/help")"
	cmp -s "$TMP/help" "$TMP/man" ||
		fail "$name: --help and $name(8) name different options: help only: $(comm -23 "$TMP/help" "$TMP/man" | tr '\n' ' ') man only: $(comm -13 "$TMP/help" "$TMP/man" | tr '\n' ' ')"
	echo "ok: $name: $(tr '\n' ' ' < "$TMP/help")"
done

# ---- exit statuses ----
# status_listed PAGE N...: each N is a .TP entry of the page's EXIT STATUS
status_listed() {
	page=$1
	shift
	for n in "$@"; do
		sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$page" | grep -A1 '^\.TP' | grep -qx "\\.B $n" ||
			fail "$(basename "$page"): exit status $n is not listed"
	done
}
status_listed "$M/nvmefsd.8" 0 1 2 3 78
status_listed "$M/nvmefsctl.8" 0 1 2 3
printf '[controller x]\ndevice = sim\nsize = 3\n' > "$TMP/bad.conf"
"$D" --check-config -c "$TMP/bad.conf" > /dev/null 2>&1
rc=$?
[ $rc = 78 ] || fail "nvmefsd --check-config of an invalid file: exit $rc"
# what nvmefsd(8) says --check-config returns for an invalid file
sed -n '/^\.B \\-\\-check\\-config$/,/^\.TP/p' "$M/nvmefsd.8" | tr '\n' ' ' | grep -q "0 if it is valid, $rc with" ||
	fail "nvmefsd(8), --check-config: does not say it exits $rc for an invalid file"
sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$M/nvmefsd.8" | sed -n '/^\.B 78$/,/^\.TP/p' | grep -q 'check\\-config' ||
	fail "nvmefsd(8), EXIT STATUS 78: --check-config not named"
# nvmefsd --help says the same: --check-config's statuses, -f, and its
# "Exit status:" line names exactly the statuses nvmefsd(8) lists
"$D" --help | tr -s ' \n' '  ' | grep -q "and exit: 0 valid, $rc not" ||
	fail "nvmefsd --help: --check-config does not say it exits 0 valid, $rc not"
"$D" --help | grep -e '-f, --foreground' | grep -q 'accepted and ignored' ||
	fail "nvmefsd --help: -f is not said to be accepted and ignored (nvmefsd(8) says so)"
sed -n '/^\.BR \\-f ", " \\-\\-foreground$/,/^\.TP/p' "$M/nvmefsd.8" | grep -q '^Accepted and ignored' ||
	fail "nvmefsd(8): -f is not said to be accepted and ignored"
help_st=$("$D" --help | sed -n '/^Exit status:/,$p' | tr '\n' ' ' | grep -oE '(^|[:,] )[0-9]+ ' |
	grep -oE '[0-9]+' | sort -n | tr '\n' ' ')
man_st=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$M/nvmefsd.8" | grep -A1 '^\.TP' |
	sed -n 's/^\.B \([0-9][0-9]*\)$/\1/p' | sort -n | tr '\n' ' ')
[ -n "$help_st" ] && [ "$help_st" = "$man_st" ] ||
	fail "nvmefsd --help's exit statuses '$help_st', nvmefsd(8)'s '$man_st'"
"$D" --no-such-option > /dev/null 2>&1
rc=$?
[ $rc = 2 ] || fail "nvmefsd --no-such-option: exit $rc, want 2"
"$D" stray > /dev/null 2>&1
rc=$?
[ $rc = 2 ] || fail "nvmefsd stray: exit $rc, want 2"
"$D" --help > /dev/null || fail "nvmefsd --help: exit $?"
"$C" no-such-command > /dev/null 2>&1
rc=$?
[ $rc = 2 ] || fail "nvmefsctl no-such-command: exit $rc, want 2"
"$C" -s "$TMP/none.sock" status > /dev/null 2>&1
rc=$?
[ $rc = 3 ] || fail "nvmefsctl on no socket: exit $rc, want 3"
"$C" --help | tr '\n' ' ' | grep -q "Exit status: 0 ok, 1 the daemon replied with an error, 2 usage, 3 cannot connect to the daemon" ||
	fail "nvmefsctl --help: its exit status line changed"
echo "ok: exit statuses"

# ---- operator_group: the same commands everywhere ----
want="attach detach inject restart"
got=$(sed -n '/^\.B operator_group$/,/^\.TP/p' "$M/nvmefs.conf.5" |
	grep -oE '^\.BR? [a-z_-]+' | awk '{ print $2 }' |
	grep -vx -e operator_group -e admin_group -e nvmefsctl | sort -u | tr '\n' ' ')
[ "$got" = "$want " ] || fail "nvmefs.conf(5), operator_group: '$got', want '$want'"
got=$(sed -n '/^\.B state-changing$/,/^\.PP/p' "$M/nvmefsctl.8" |
	grep -oE '^\.BR? [a-z_-]+' | awk '{ print $2 }' |
	grep -vx -e operator_group -e admin_group -e state-changing | sort -u | tr '\n' ' ')
[ "$got" = "$want " ] || fail "nvmefsctl(8), state-changing: '$got', want '$want'"
got=$(sed -n '/^# Who may use nvmefsctl/,/^#operator_group/p' "$ROOT/etc/nvmefs.conf" | tr '\n' ' ' |
	sed 's/.*members of operator_group also the state-changing ones: //; s/ (they.*//' |
	tr -c 'a-z\n' ' ' | tr ' ' '\n' | grep -vx -e '' -e and | sort -u | tr '\n' ' ')
[ "$got" = "$want " ] || fail "etc/nvmefs.conf, operator_group: '$got', want '$want'"
grep -q '^`detach` and `restart` need root or `operator_group`' "$ROOT/docs/operations.md" &&
	grep -q "metrics) need root, \`admin_group\` or \`operator_group\`; \`inject\`, \`attach\`,\$" "$ROOT/docs/operations.md" ||
	fail "docs/operations.md: the operators' commands are not inject, attach, detach and restart"
echo "ok: operator_group: $want"

# ---- vfio-bind as installed ----
grep -q 'install -m 755 scripts/vfio-bind $(DESTDIR)$(SBINDIR)/vfio-bind' "$ROOT/Makefile" ||
	fail "make install no longer puts vfio-bind in SBINDIR: fix this test and the docs"
for f in "$M"/*.[158]; do
	grep -n 'scripts/vfio' "$f" && fail "$(basename "$f") names scripts/vfio-bind, not the installed vfio-bind"
done
"$C" --help | grep -n 'scripts/vfio' && fail "nvmefsctl --help names scripts/vfio-bind"
echo "ok: vfio-bind"

[ $FAILS = 0 ] || { echo "$FAILS failure(s)"; exit 1; }
echo "all checks passed"
