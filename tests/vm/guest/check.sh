# check.sh - sourced by the in-guest test scripts (busybox sh).
#   t NAME WANT REGEX CMD...   run CMD; WANT is ok (exit 0) or fail (exit
#                              not 0); its output must match REGEX (grep -E)
#   c NAME CMD...              a plain condition that must hold
#   done_checks                summary line; exits 1 when a check failed
# Each check prints "ok: NAME" or "NOT OK: NAME" with the output indented,
# then the guest uptime at its end (to see where a slow run spends its time).
n_ok=0
n_bad=0
t() {
	name=$1 want=$2 re=$3
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	good=1
	case $want in
	ok) [ $rc = 0 ] || good=0 ;;
	fail) [ $rc != 0 ] || good=0 ;;
	esac
	echo "$out" | grep -Eq -- "$re" || good=0
	if [ $good = 1 ]; then
		n_ok=$((n_ok + 1)); echo "ok: $name"
	else
		n_bad=$((n_bad + 1)); echo "NOT OK: $name (exit $rc, wanted $want, output must match: $re)"
	fi
	echo "$out" | sed 's/^/    | /'
	echo "    @ $(cut -d' ' -f1 /proc/uptime)s"
}
c() {
	name=$1
	shift
	if "$@"; then
		n_ok=$((n_ok + 1)); echo "ok: $name"
	else
		n_bad=$((n_bad + 1)); echo "NOT OK: $name"
	fi
}
driver_of() { basename "$(readlink /sys/bus/pci/devices/$1/driver 2>/dev/null)" 2>/dev/null; }
# wait up to 5 s for a path to appear (or, with !, to go)
wait_path() {
	i=0
	if [ "$1" = '!' ]; then
		while [ -e "$2" ] && [ $i -lt 50 ]; do usleep 100000; i=$((i + 1)); done
		[ ! -e "$2" ]
	else
		while [ ! -e "$1" ] && [ $i -lt 50 ]; do usleep 100000; i=$((i + 1)); done
		[ -e "$1" ]
	fi
}
done_checks() {
	echo "checks: $n_ok ok, $n_bad not ok"
	[ $n_bad = 0 ]
	exit $?
}
