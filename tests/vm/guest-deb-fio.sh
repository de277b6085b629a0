#!/bin/sh
# guest-deb-fio.sh FILE TAG - run by t-deb-host's unprivileged user in its
# own login session: rounds of fio (libaio, O_DIRECT, iodepth 16, 4k-128k at
# random, 16 MiB written then verified with crc32c) on FILE until
# /run/vmtest/stop exists.  Each round appends "N RC" to ~/fio-TAG/rounds
# and keeps its JSON; the first failed round ends the loop with status 1.
f=$1 tag=$2
dir=$HOME/fio-$tag
mkdir -p "$dir"
n=0
while [ ! -e /run/vmtest/stop ]; do
	n=$((n + 1))
	fio --name="$tag" --filename="$f" --allow_file_create=0 --ioengine=libaio --direct=1 \
		--iodepth=16 --bssplit=4k/40:16k/30:64k/20:128k/10 --rw=randwrite --size=16M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --randseed="$n" \
		--output-format=json --output="$dir/round-$n.json" > "$dir/round-$n.err" 2>&1
	rc=$?
	grep -q '"error" : 0,' "$dir/round-$n.json" 2> /dev/null || [ $rc != 0 ] || rc=99
	echo "$n $rc" >> "$dir/rounds"
	[ $rc = 0 ] || exit 1
done
exit 0
