# fuse-lib.sh - what the FUSE benchmarks share (sourced by bash scripts):
# mounts, stopping the servers they started, waiting for a mount.
# The caller keeps PIDS and MOUNTS (arrays of what it started) and reads WHY
# after a failed wait_mount.

is_mounted() { awk -v p="$1" '$2 == p { f = 1 } END { exit !f }' /proc/mounts; }

unmount() {
	is_mounted "$1" || return 0
	fusermount3 -u "$1" 2>/dev/null || fusermount3 -u -z "$1" 2>/dev/null || umount -l "$1" 2>/dev/null
}

# stop_pid PID [SECONDS]: SIGTERM, then SIGKILL after SECONDS (10)
stop_pid() {
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq $((${2:-10} * 10))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# every process in PIDS, last started first (a client before the server it
# talks to), then every mount in MOUNTS; STOP_SECONDS as for stop_pid
stop_all() {
	local i m
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}" "${STOP_SECONDS:-10}"; done
	for m in "${MOUNTS[@]}"; do unmount "$m"; done
	PIDS=()
	MOUNTS=()
}

# wait_mount MNT FILE PID SECONDS NAME LOG: MNT is a mount and FILE exists
# while PID lives; otherwise WHY says what happened, with the log's last line
wait_mount() {
	local mnt=$1 file=$2 pid=$3 n=$(($4 * 10)) name=$5 log=$6 last
	while [ $n -gt 0 ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null
			WHY="$name exited ($?) before mounting"
			break
		fi
		is_mounted "$mnt" && [ -e "$file" ] && return 0
		sleep 0.1
		n=$((n - 1))
	done
	[ $n -gt 0 ] || WHY="$name did not mount within $4 s"
	last=$(grep -v '^[[:space:]]*$' "$log" 2>/dev/null | tail -n 1 | tr '|\t' '/ ')
	[ -z "$last" ] || WHY="$WHY: $last"
	return 1
}

logtail() { [ -s "$1" ] && tail -n 3 "$1" | sed 's/^/    /' >&2; }
