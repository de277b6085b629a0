#!/bin/sh
# t-completion.sh - contrib/bash-completion/nvmefsctl against the real
# nvmefsctl and a running daemon: it offers every command and every fault
# that nvmefsctl --help lists (and nothing else), options, and the names of
# the daemon's controllers and (for iostat) namespace files (asked over the
# socket given with -s or -c).
# transport-independent: bash completion over the admin socket
. "$(dirname "$0")/lib.sh"
lib_init
command -v bash > /dev/null || skip "no bash"
C=$BUILD/nvmefsctl
COMP=$ROOT/contrib/bash-completion/nvmefsctl
conf_sim nvme0 16M backing=ram -- fast_1 16M backing=ram
daemon_start nvme0n1 fast_1n1 || { fail "start"; finish; }

# complete WORDS...: what the completion offers for the last word (sorted,
# one line); nvmefsctl is this build's
complete_words() {
	PATH=$BUILD:$PATH bash -c '. "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
		_nvmefsctl; printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$COMP" "$@"
}

# the commands and faults --help lists, against the completion's lists
"$C" --help > "$TMP/help"
sed -n '/^Commands:/,/^Options:/p' "$TMP/help" | sed -n 's/^  \([a-z][a-z-]*\).*/\1/p' | sort -u > "$TMP/cmds"
[ "$(wc -l < "$TMP/cmds")" -ge 15 ] || fail "only $(wc -l < "$TMP/cmds") commands read from --help"
got=$(complete_words nvmefsctl "" | tr ' ' '\n' | sed '/^$/d' | sort -u)
[ "$got" = "$(cat "$TMP/cmds")" ] ||
	fail "commands offered differ from --help's: $(echo "$got" | tr '\n' ' ') / $(tr '\n' ' ' < "$TMP/cmds")"
# the faults: the first word of each comma-separated item of inject's help
want=$(sed -n '/inject CONTROLLER FAULT/,/^  config/p' "$TMP/help" | sed '1d;$d' | tr '\n' ' ' |
	sed 's/([^)]*)//g; s/.*software controller only://' | tr ',' '\n' | awk '{ print $1 }' |
	grep -E '^[a-z][a-z-]*$' | sort | tr '\n' ' ')
[ "$(echo "$want" | wc -w)" -ge 10 ] || fail "only these faults read from --help: $want"
faults=$(complete_words nvmefsctl -s "$TMP/admin.sock" inject nvme0 "")
[ "$faults" = "$want" ] || fail "faults offered: $faults; --help lists: $want"

got=$(complete_words nvmefsctl st)
[ "$got" = "stats status " ] || fail "'st' completes to '$got'"
got=$(complete_words nvmefsctl --js)
[ "$got" = "--json " ] || fail "'--js' completes to '$got'"
# the controllers, over -s and over -c
got=$(complete_words nvmefsctl -s "$TMP/admin.sock" smart-log "")
[ "$got" = "fast_1 nvme0 " ] || fail "smart-log over -s: '$got'"
got=$(complete_words nvmefsctl -c "$CONF" --json detach n)
[ "$got" = "nvme0 " ] || fail "detach n over -c: '$got'"
got=$(complete_words nvmefsctl -s "$TMP/admin.sock" attach --w)
[ "$got" = "--wait " ] || fail "attach --w: '$got'"
got=$(complete_words nvmefsctl -s "$TMP/admin.sock" inject nvme0 warn te)
[ "$got" = "temperature " ] || fail "inject warn te: '$got'"
# iostat: its options, and the namespace files' names
got=$(complete_words nvmefsctl -s "$TMP/admin.sock" iostat -)
[ "$got" = "--extended --json -j -t -x -y " ] || fail "iostat -: '$got'"
got=$(complete_words nvmefsctl -s "$TMP/admin.sock" iostat -y fa)
[ "$got" = "fast_1n1 " ] || fail "iostat -y fa: '$got'"
# no daemon on the socket: nothing, and no error
got=$(complete_words nvmefsctl -s "$TMP/none.sock" identify "" 2>&1)
[ -z "$(echo "$got" | tr -d ' ')" ] || fail "without a daemon: '$got'"
echo "commands, faults, options and controller names complete"
daemon_stop
finish
