#!/bin/sh
# t-hugepages.sh - the DMA pools' sizes and hugepages (docs/operations.md,
# section 11): with none reserved every DMA pool logs "4 KiB pages"; with
# exactly the pools' size in 2 MiB pages reserved each pool logs its
# hugepages, the daemon holds that many (its HugetlbPages), HugePages_Free
# (and the node's free_hugepages) drop by that much and come back when the
# daemon stops; one page less and one pool falls back, saying why; with two
# controllers under dma_isolation each reactor has one pool per controller,
# of 32 MiB / 2 + queue_depth x 4 KiB, rounded up to 2 MiB when on
# hugepages.  A case during which another process took hugepages is skipped
# with a message: it cannot be judged.  /proc/sys/vm/nr_hugepages is
# restored at exit; a machine that cannot reserve hugepages skips those
# cases, saying so.
# transport-independent: the pools' sizes are counted for /dev/fuse
# alone: it reserves hugepages and counts them; any other engine (a unit test, a daemon) would take them
. "$(dirname "$0")/lib.sh"
lib_init
HP_OLD=$(cat /proc/sys/vm/nr_hugepages)
cleanup() {
	[ "$(cat /proc/sys/vm/nr_hugepages)" = "$HP_OLD" ] || echo "$HP_OLD" > /proc/sys/vm/nr_hugepages
	lib_cleanup
}
trap cleanup EXIT

# ---- DMA pools and hugepages ----
# pool lines of the last start (the log keeps every start)
pools() { sed -n '/^--- start/h; /^--- start/!H; ${x; p}' "$LOG" | grep 'dma: buffer pool of'; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
NODE_HP=/sys/devices/system/node/node0/hugepages/hugepages-2048kB
# hp_run FREE NAMES...: the daemon started with NAMES and stopped again;
# HP_USED is the hugepages it held (its own HugetlbPages), HP_BACK what
# HugePages_Free got back at its stop, HP_OTHERS what other processes took
# meanwhile (HugePages_Free before the start, less after it, less HP_USED).
# FREE is the hugepages the case reserved: another hugepage user (pages
# held before the start, or taken meanwhile) makes a case unjudgeable, not
# failed: hp_alone says so and the case is skipped.
hp_run() {
	hp_want=$1
	shift
	hp_f0=$(meminfo HugePages_Free)
	hp_n0=$(cat $NODE_HP/free_hugepages)
	daemon_start "$@" || { fail "start with hugepages ($*)"; finish; }
	HP_USED=$(($(awk '$1 == "HugetlbPages:" { print $2 }' "/proc/$DPID/status") / 2048))
	hp_f1=$(meminfo HugePages_Free)
	HP_NODE=$((hp_n0 - $(cat $NODE_HP/free_hugepages)))
	HP_OTHERS=$((hp_f0 - hp_f1 - HP_USED))
	daemon_stop
	HP_BACK=$(($(meminfo HugePages_Free) - hp_f1))
	pools
	echo "hugepages: the daemon held $HP_USED (node0: $HP_NODE), $HP_BACK back at its stop, $HP_OTHERS taken by others meanwhile"
}
hp_alone() { # WHAT
	[ "$hp_f0" = "$hp_want" ] && [ "$HP_OTHERS" = 0 ] && [ "$HP_BACK" = "$HP_USED" ] && return 0
	echo "SKIP part: $1: other processes held or took hugepages ($hp_f0 free at the start of $hp_want reserved, $HP_OTHERS taken meanwhile, $HP_BACK back of $HP_USED): not judged"
	return 1
}
# the pools' size without io_uring's entries: over /dev/fuse a reactor's
# pool is 32 MiB for requests and fuse_queue_depth (16) x 1 MiB for its
# landing buffers
FUSE_TRANSPORT=classic
# two controllers, dma_isolation: one pool per controller per reactor
# (16 MiB + 256 KiB each; rounded up to 18 MiB where another process has
# reserved hugepages meanwhile)
DMA_ISOLATION=controller QD=64 conf_sim nvme0 16M -- nvme1 16M
daemon_start nvme0n1 nvme1n1 || { fail "start (two controllers)"; finish; }
daemon_stop
pools
n=$(pools | grep -Ec "buffer pool of ($(((16 << 10) + 64 * 4)) KiB on .*: 4 KiB pages|18 MiB on .*: 9 2 MiB hugepages)")
[ "$n" = 2 ] || fail "dma_isolation, 2 controllers, queue_depth 64: $n pools of 16 MiB + 256 KiB, want 2"

QUEUES=2 CPUS=0,1
conf_sim nvme0 16M
if [ "$HP_OLD" != 0 ] || [ "$(meminfo HugePages_Total)" != 0 ]; then
	echo "SKIP part: hugepages are reserved already (nr_hugepages $HP_OLD): the 4 KiB case is not checked"
else
	hp_run 0 nvme0n1
	if [ "$HP_USED" != 0 ]; then
		echo "SKIP part: another process reserved hugepages meanwhile: the 4 KiB case is not judged"
	else
		[ "$(pools | grep -c 'buffer pool of 48 MiB on .*: 4 KiB pages (not enough free 2 MiB hugepages)')" = 2 ] ||
			fail "without hugepages: want two 48 MiB pools on 4 KiB pages"
	fi
fi
# two reactors of one 48 MiB pool each: 2 x 24 pages
WANT=48
echo $((HP_OLD + WANT)) > /proc/sys/vm/nr_hugepages 2>/dev/null
if [ "$(meminfo HugePages_Free)" -gt "$WANT" ]; then
	echo "SKIP part: hugepages were free before this test reserved any ($(meminfo HugePages_Free) free): the sizes are not judged"
	echo "$HP_OLD" > /proc/sys/vm/nr_hugepages
elif [ "$(meminfo HugePages_Free)" -lt "$WANT" ]; then
	echo "SKIP part: cannot reserve $WANT 2 MiB hugepages (HugePages_Free $(meminfo HugePages_Free))"
	echo "$HP_OLD" > /proc/sys/vm/nr_hugepages
else
	hp_run $WANT nvme0n1
	if hp_alone "$WANT hugepages free"; then
		[ "$(pools | grep -c 'buffer pool of 48 MiB on NUMA node 0: 24 2 MiB hugepages$')" = 2 ] ||
			fail "with $WANT hugepages free: want two pools on 24 hugepages each"
		[ "$HP_USED" = $WANT ] || fail "the daemon held $HP_USED hugepages, want $WANT"
		[ "$HP_NODE" = $WANT ] || fail "node0 free_hugepages went down by $HP_NODE, want $WANT"
	fi
	# one page short: the second pool does not fit and says so
	echo $((HP_OLD + WANT - 1)) > /proc/sys/vm/nr_hugepages
	hp_run $((WANT - 1)) nvme0n1
	if hp_alone "one hugepage short"; then
		[ "$(pools | grep -c ': 24 2 MiB hugepages$')" = 1 ] &&
			[ "$(pools | grep -c ': 4 KiB pages (not enough free 2 MiB hugepages)$')" = 1 ] ||
			fail "one hugepage short: want one pool on hugepages and one on 4 KiB pages"
		[ "$HP_USED" = 24 ] || fail "one hugepage short: the daemon held $HP_USED hugepages, want 24"
	fi
	# dma_isolation, two controllers, queue_depth 64, one reactor: two
	# pools of 16 MiB + 256 KiB, each rounded up to 18 MiB: 2 x 9 pages
	echo $((HP_OLD + 18)) > /proc/sys/vm/nr_hugepages
	QUEUES=1 CPUS=0
	conf_sim nvme0 16M -- nvme1 16M
	hp_run 18 nvme0n1 nvme1n1
	if hp_alone "dma_isolation with 18 hugepages"; then
		[ "$(pools | grep -c 'buffer pool of 18 MiB on NUMA node 0: 9 2 MiB hugepages$')" = 2 ] ||
			fail "dma_isolation with 18 hugepages: want two 18 MiB pools of 9 hugepages"
		[ "$HP_USED" = 18 ] || fail "isolation: the daemon held $HP_USED hugepages, want 18"
	fi
	echo "$HP_OLD" > /proc/sys/vm/nr_hugepages
	echo "hugepage sizing checked"
fi
finish
