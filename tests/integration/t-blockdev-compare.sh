#!/bin/sh
# t-blockdev-compare.sh - a namespace file behaves like a block device.
#
# One script of operations (tests/helpers/bdev-ops.c) runs on a loop device
# over a file of exactly the namespace's size and block size, and on the
# namespace file.  Every line must give the same result on both, and the
# result the kernel's block device gives is checked too (a data digest
# against the pattern that was written, "zero" where a range was punched or
# zeroed).  Where docs/fuse.md ("Where a namespace file differs from a block
# device") documents a difference, the line names both results and each is
# checked.  Covers: O_TRUNC with a reader (pread and Linux AIO O_DIRECT)
# opened before it, ftruncate/truncate, every fallocate mode, aligned,
# unaligned and across the end, reads and writes at and across the end,
# lseek SEEK_END/DATA/HOLE, statfs, private and shared mmap.
. "$(dirname "$0")/lib.sh"
lib_init
H=$(tool bdev-ops) || exit 1
S=$((64 << 20))
B=4096
K=$((1 << 20))
loop_file $S $B
LOOP=$LOOP_DEV
conf_sim nvme0 64M namespaces=1 "block_size=$B" backing=ram
daemon_start nvme0n1 || { fail "start"; finish; }
F=$MNT/nvme0n1

SCRIPT=$TMP/script
EXP=$TMP/expect
: > "$SCRIPT"
: > "$EXP"
N=0
# pat SEED OFF LEN: the result a read of pattern SEED at [OFF, OFF+LEN) gives
pat() { echo "pat $1 $2 $3" | "$H" /dev/null | sed 's/.* -> //'; }
# both CMD RESULT: the same RESULT on the block device and the namespace file
both() {
	N=$((N + 1))
	echo "$1" >> "$SCRIPT"
	printf '%s\t%s\t%s\n' $N "$2" "$2" >> "$EXP"
}
# differ CMD BLOCKDEV_RESULT OUR_RESULT: a documented difference (* = any)
differ() {
	N=$((N + 1))
	echo "$1" >> "$SCRIPT"
	printf '%s\t%s\t%s\n' $N "$2" "$3" >> "$EXP"
}

# --- O_TRUNC: a reader opened before it keeps seeing the whole device
both "open b rdwr" "0"
both "pwrite b 0 $K 1" "$K"
both "pwrite b $((S - 65536)) 65536 2" "65536"
both "open d rdonly,direct" "0"
both "aioread d $((S - B)) $B" "$(pat 2 $((S - B)) $B)"
differ "pread d 100 100" "-1 EINVAL" "$(pat 1 100 100)"
both "open t wronly,trunc" "0"
differ "fstat t" "type=blk size=0" "type=reg size=$S"
both "size t" "$S"
both "aioread d $((S - B)) $B" "$(pat 2 $((S - B)) $B)"
both "pread d $((S - 2 * B)) $((2 * B))" "$(pat 2 $((S - 2 * B)) $((2 * B)))"
differ "fstat d" "type=blk size=0" "type=reg size=$S"
both "size d" "$S"
both "pread b 0 $K" "$(pat 1 0 $K)"
both "close t" "0"
both "open t rdwr,trunc" "0"
both "aioread d $((S - B)) $B" "$(pat 2 $((S - B)) $B)"
both "close t" "0"

# --- the size cannot change
both "ftruncate b 4096" "-1 EINVAL"
both "ftruncate b $S" "-1 EINVAL"
both "ftruncate b $((2 * S))" "-1 EINVAL"
both "truncate $((S / 2))" "-1 EINVAL"
differ "truncate 0" "-1 EINVAL" "0"
both "size b" "$S"
both "aioread d $((S - B)) $B" "$(pat 2 $((S - B)) $B)"

# --- fallocate: modes a block device refuses
R0=$K
for m in 0 keep punch collapse insert "zero|punch" "punch|keep|nohide" "zero|keep|collapse"; do
	both "fallocate b $m $R0 $((256 << 10))" "-1 EOPNOTSUPP"
done
both "pread b 0 $K" "$(pat 1 0 $K)"

# --- fallocate: punch and zero read back as zeroes, the bytes around kept
seed=20
for m in "punch|keep" zero "zero|keep"; do
	seed=$((seed + 1))
	both "pwrite b $R0 $((512 << 10)) $seed" "$((512 << 10))"
	both "fallocate b $m $((R0 + (128 << 10))) $((256 << 10))" "0"
	both "pread b $R0 $((128 << 10))" "$(pat $seed $R0 $((128 << 10)))"
	both "pread b $((R0 + (128 << 10))) $((256 << 10))" "$((256 << 10)) zero"
	both "pread b $((R0 + (384 << 10))) $((128 << 10))" "$(pat $seed $((R0 + (384 << 10))) $((128 << 10)))"
done
# a large range: more than one command at the controller's limits
both "pwrite b $((8 * K)) $((16 * K)) 30" "$((16 * K))"
both "fallocate b punch|keep $((8 * K)) $((16 * K))" "0"
both "pread b $((8 * K)) $((16 * K))" "$((16 * K)) zero"
both "pwrite b $((8 * K)) $((16 * K)) 31" "$((16 * K))"
both "fallocate b zero|keep $((8 * K)) $((16 * K))" "0"
both "pread b $((8 * K)) $((16 * K))" "$((16 * K)) zero"

# --- fallocate: unaligned ranges (a block device refuses them; a namespace
# file zeroes exactly the bytes asked for)
U=$((2 * K))
for m in "punch|keep" zero "zero|keep"; do
	seed=$((seed + 1))
	both "pwrite b $U 65536 $seed" "65536"
	differ "fallocate b $m $((U + 100)) 5000" "-1 EINVAL" "0"
	both "pread b $U 100" "$(pat $seed $U 100)"
	differ "pread b $((U + 100)) 5000" "$(pat $seed $((U + 100)) 5000)" "5000 zero"
	both "pread b $((U + 5100)) $((65536 - 5100))" "$(pat $seed $((U + 5100)) $((65536 - 5100)))"
done

# --- fallocate: ranges at and across the end
both "pwrite b $((S - 65536)) 65536 40" "65536"
both "fallocate b zero $((S - 8192)) 16384" "-1 EINVAL"
both "fallocate b punch|keep $S 4096" "-1 EINVAL"
both "fallocate b zero|keep $S 4096" "-1 EINVAL"
both "fallocate b zero $((S + 4096)) 4096" "-1 EINVAL"
both "pread b $((S - 65536)) 65536" "$(pat 40 $((S - 65536)) 65536)"
both "fallocate b zero|keep $((S - 8192)) 16384" "0"
both "pread b $((S - 8192)) 16384" "8192 zero"
both "pread b $((S - 16384)) 8192" "$(pat 40 $((S - 16384)) 8192)"
both "fallocate b punch|keep $((S - 24576)) 65536" "0"
both "pread b $((S - 24576)) 24576" "24576 zero"
both "pread b $((S - 65536)) 40960" "$(pat 40 $((S - 65536)) 40960)"

# --- reads and writes at and across the end
both "pwrite b $((S - B)) $((2 * B)) 41" "$B"
both "pread b $((S - B)) $((2 * B))" "$(pat 41 $((S - B)) $B)"
both "pwrite b $((S - 100)) 300 42" "100"
both "pread b $((S - 300)) 200" "$(pat 41 $((S - 300)) 200)"
both "pread b $((S - 100)) 300" "$(pat 42 $((S - 100)) 100)"
both "pwrite b $S 4096 43" "-1 ENOSPC"
both "pwrite b $((S + 65536)) 1 43" "-1 ENOSPC"
both "pread b $S 4096" "0"
both "pread b $((S + 65536)) 4096" "0"
both "size b" "$S"

# --- lseek
both "lseek b 0 end" "$S"
both "lseek b -4096 end" "$((S - 4096))"
# a block device has no SEEK_DATA/SEEK_HOLE (fixed_size_llseek: EINVAL)
both "lseek b 0 data" "-1 EINVAL"
both "lseek b 12345 data" "-1 EINVAL"
both "lseek b 0 hole" "-1 EINVAL"
both "lseek b $((S - 1)) hole" "-1 EINVAL"
both "lseek b $S data" "-1 EINVAL"
both "lseek b $S hole" "-1 EINVAL"
both "lseek b 4096 set" "4096"
both "lseek b 100 cur" "4196"
differ "lseek b $((S + 4096)) set" "-1 EINVAL" "$((S + 4096))"

# --- statfs: a block device reports the file system its node is on
differ "statfs b" "*" "bsize=4096 frsize=4096 blocks=$((S / 4096)) bfree=0 bavail=0"

# --- mmap
both "pwrite b 0 65536 50" "65536"
P50=$(pat 50 0 65536 | cut -d' ' -f2)
P51=$(pat 51 0 65536)
both "mmap b private 0 65536 51" "mapped $P50 pread=65536 $P50"
differ "mmap b shared 0 65536 51" "mapped $P50 msync=0 pread=$P51" "-1 ENODEV"
both "close b" "0"
both "close d" "0"

"$H" "$LOOP" < "$SCRIPT" > "$TMP/out.blk" 2> "$TMP/err.blk" || fail "helper on $LOOP: $(cat "$TMP/err.blk")"
"$H" "$F" < "$SCRIPT" > "$TMP/out.ns" 2> "$TMP/err.ns" || fail "helper on $F: $(cat "$TMP/err.ns")"
[ "$(wc -l < "$TMP/out.blk")" = $N ] || fail "block device: $(wc -l < "$TMP/out.blk") results, want $N"
[ "$(wc -l < "$TMP/out.ns")" = $N ] || fail "namespace file: $(wc -l < "$TMP/out.ns") results, want $N"

# line by line: expect[i] = i, blockdev result, our result
bad=$(paste "$TMP/out.blk" "$TMP/out.ns" | awk -F'\t' -v expf="$EXP" '
BEGIN { while ((getline l < expf) > 0) { split(l, f, "\t"); eb[f[1]] = f[2]; en[f[1]] = f[3] } }
{
	cmd = $1; sub(/ -> .*/, "", cmd)
	b = $1; sub(/^[^>]*-> /, "", b)
	n = $2; sub(/^[^>]*-> /, "", n)
	i = NR; ok = 1
	if (eb[i] != "*" && b != eb[i]) ok = 0
	if (en[i] != "*" && n != en[i]) ok = 0
	if (!ok) { printf "line %d: %s\n  block device: %s (want %s)\n  namespace:    %s (want %s)\n", i, cmd, b, eb[i], n, en[i]; bad++ }
}
END { exit bad > 0 }') || { echo "$bad"; fail "results differ from the expected ones"; }
echo "$N operations compared on $LOOP and $F"
daemon_stop
[ "$DAEMON_RC" = 0 ] || fail "exit $DAEMON_RC"
finish
