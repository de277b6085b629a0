# guest-recovery.sh - in the guest (busybox sh, host /usr shared for fio,
# dd, cmp; the host's test folder shared at /mnt/share):
# nvmefsd over VFIO on the controller at $BDF (behind a hot-pluggable PCIe
# root port), io_timeout_ms = 1000, and faults made by the host through QMP
# on request ("@@HOST what@@" on the console; the host answers by creating
# /mnt/share/ack-what):
#   (0) warn-spare / warn-temp / warn-clear: the host sets QEMU's
#       smart_critical_warning property (qom-set) to 1, 3 and 0: each bit
#       newly set raises a SMART asynchronous event, and the daemon (which
#       keeps AERs armed) shows the warning in the metrics and status (the
#       time it took is measured), logs it once; no event clears a warning:
#       the next timed SMART read (health_interval = 1) does;
#   (a) throttle-on / throttle-off: QEMU's block layer throttles the
#       namespace to 1 IOPS while fio randrw crc32c verify runs, until
#       commands have taken longer than io_timeout_ms (timeouts counted), then
#       2 s more: fio must end (no hang) with
#       no verify mismatch (EIO allowed only from commands whose retries ran
#       out, counted in failed_after_retries); afterwards dd + cmp works.
#   (b) aer-cor / aer-nonfatal: PCIe errors injected at the root port above
#       the controller (HMP pcie_aer_inject_error) while fio verifies.  A
#       correctable one (RCVR) resets nothing (QEMU 7.2 sends no message for
#       one, and Linux would tell vfio-pci of none).  An uncorrectable
#       non-fatal one (COMP_TIME) makes the guest's AER driver run error
#       recovery below the port, vfio-pci signals its error eventfd, and the
#       daemon must log "PCIe error reported (AER)" and reset the controller
#       (resets_started and resets_ok in stats --json grow) while fio still
#       runs and commands go on; fio, stopped after the reset, ends with no
#       verify mismatch and no error (EIO only from commands whose retries
#       ran out after timeouts, as in (a)); the data is intact.
#   (c) remove: QMP device_del while fio runs: the guest's removal completes
#       (the function leaves /sys/bus/pci/devices) within 30 s, the daemon
#       survives, fio ends (60 s deadline), reads of the file fail at once with EIO, status
#       says removed;
#   (d) replug-4k: the host adds the controller again on the same image but
#       with 4 KiB blocks instead of 512 B (same bytes, other LBA format and
#       count): attach is refused while the device is gone, and once it is
#       back on vfio-pci it is refused because the namespaces changed; the
#       daemon stays up, the file keeps its size and its reads and writes
#       fail with EIO;
#   (e) swap-512: the host removes the controller and adds it with 512-byte
#       blocks again: attach works, the data written before the removal
#       reads back; aer-again: a non-fatal PCIe error at the root port resets
#       the re-attached controller (attach wired its error IRQ again);
#   (f) swap-4k: removed and added with 4 KiB blocks once more: attach is
#       refused again, reads fail with EIO, and SIGTERM stops the daemon
#       with exit 0 (a controller whose attach was refused is left alone).
. /payload/check.sh
BDF=${BDF:-0000:01:00.0}
W=/tmp/rec
MNT=$W/mnt
CONF=$W/nvmefs.conf
LOG=$W/daemon.log
F=$MNT/nvme0n1
SHARE=/mnt/share
DD=/usr/bin/dd CMP=/usr/bin/cmp
mkdir -p "$W"
# alive PID: running, not a zombie waiting for this shell to reap it
alive() { [ -d /proc/$1 ] && ! grep -q '^State:.*Z' /proc/$1/status 2>/dev/null; }
ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
ctl() { nvmefsctl -s $W/admin.sock "$@"; }
# The daemon's JSON read with awk, not python3, whose start-up over 9p costs
# seconds in an emulated guest: nvmefsctl prints one member a line.
state() { ctl status --json | awk -F'"' '$2 == "state" { print $4; exit }'; }
ask_host() {
	echo "@@HOST $1@@"
	i=0
	while [ ! -e $SHARE/ack-$1 ] && [ $i -lt 600 ]; do usleep 100000; i=$((i + 1)); done
	[ -e $SHARE/ack-$1 ]
}
# fio_bg SECS: randrw crc32c verify on 32 MiB in the background; returns
# once fio has set up its signal handlers (SIGINT no longer ignored: a
# background job of a script starts with it ignored, and fio, loaded over 9p
# in an emulated guest, takes seconds to get there), so that a fault made
# now finds it about to do I/O, and a SIGINT stops it
fio_bg() {
	rm -f $W/fio.json
	fio --name=verify --filename="$F" --ioengine=libaio --direct=1 --rw=randrw \
		--bsrange=4k-64k --iodepth=4 --numjobs=2 --runtime=$1 --time_based \
		--size=16M --offset_increment=16M --verify=crc32c --verify_backlog=16 \
		--verify_fatal=1 --verify_state_save=0 --output-format=json \
		--output=$W/fio.json > $W/fio.err 2>&1 &
	FIO=$!
	f0=$(ms)
	i=0
	while [ $i -lt 600 ] && alive $FIO; do
		m=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$FIO/status 2>/dev/null)
		[ -n "$m" ] && [ $((0x$m & 2)) = 0 ] && break
		usleep 100000
		i=$((i + 1))
	done
	echo "measure: fio took $(($(ms) - f0)) ms to start"
}
# fio_end DEADLINE_S: wait (killing fio at the deadline); FIO_ERR = fio's
# error, "hung" or "mismatch".  Not in a $(...) subshell: only this shell
# can reap fio, and an unreaped fio would look alive to kill -0.
fio_end() {
	i=0
	while alive $FIO && [ $i -lt $(($1 * 10)) ]; do
		usleep 100000
		i=$((i + 1))
	done
	if alive $FIO; then
		echo "fio still running after $1 s: $(cat /proc/$FIO/wchan 2>/dev/null)"
		tail -n 5 $W/fio.err
		kill -9 $FIO
		wait $FIO
		FIO_ERR=hung
		return
	fi
	wait $FIO
	if grep -Eqi 'verify (failed|error)|bad magic|crc32c: ' $W/fio.err $W/fio.json; then
		FIO_ERR=mismatch
		return
	fi
	# the largest of the jobs' "error" members (fio's JSON: one a line)
	FIO_ERR=$(awk -F: 'BEGIN { m = 0 } /^ *"error" :/ { v = $2 + 0; if (v > m) m = v; n++ }
		END { if (n) print m; else print "unreadable" }' $W/fio.json 2>/dev/null)
}
# counters P: P_timeouts, P_resets_started, P_resets_ok ... (the integer
# recovery counters of the controller) and P_submitted (commands submitted
# in all) from one stats call
counters() {
	eval "$(ctl stats --json | awk -v p="$1" '
		/"recovery": \{/ { s = "r"; next }
		/"totals": \{/ { s = "t"; next }
		s == "r" && /\}/ { s = "" }
		s == "t" && /[][{}]/ { s = "" }
		s != "" && $2 ~ /^[0-9]+,?$/ {
			k = $1; gsub(/[":]/, "", k); v = $2; sub(/,$/, "", v)
			if (s == "r" || k == "submitted") print p "_" k "=" v
		}')"
}
rstat() { # KEY: one of the controller's recovery counters
	counters rs
	eval "echo \$rs_$1"
}

cat > "$CONF" <<EOF
[daemon]
mountpoint = $MNT
admin_socket = $W/admin.sock
file_owner = 0
file_group = 0
log_level = info
health_interval = 1
[engine]
queues = 1
cpus = 1
queue_depth = 64
mode = interrupt
io_timeout_ms = 1000
[controller nvme0]
device = $BDF
EOF
nvmefsd -f -c "$CONF" > "$LOG" 2>&1 &
DPID=$!
i=0
while [ ! -f "$F" ] && [ $i -lt 600 ] && kill -0 $DPID 2>/dev/null; do usleep 100000; i=$((i + 1)); done
c "daemon up, $F there" [ -f "$F" ]
[ -f "$F" ] || { cat "$LOG"; done_checks; }
head -c $((4 << 20)) /dev/urandom > $W/data
t "dd 4 MiB O_DIRECT at 40 MiB" ok "" $DD if=$W/data of="$F" bs=1M seek=40 oflag=direct conv=notrunc status=none
cmp_back() { $DD if="$F" bs=1M skip=40 count=4 iflag=direct status=none | $CMP - $W/data; }
t "cmp" ok "" cmp_back

echo "== (0) SMART critical warnings raised by QEMU (asynchronous events)"
# crit WARNING: the state-set gauge of that warning bit in the metrics
crit() {
	ctl metrics | awk -v w="warning=\"$1\"" '
		index($1, "nvmefs_controller_critical_warning{") == 1 && index($1, w) { print $2; exit }'
}
# crit_wait WARNING VALUE: until the metric says VALUE (10 s at most);
# prints the milliseconds it took
crit_wait() {
	w0=$(ms)
	i=0
	while [ "$(crit $1)" != "$2" ] && [ $i -lt 200 ]; do usleep 50000; i=$((i + 1)); done
	echo "measure: critical warning $1 = $(crit $1) after $(($(ms) - w0)) ms"
	[ "$(crit $1)" = "$2" ]
}
c "no critical warning at start" [ "$(crit spare)" = 0 ]
aers=$(ctl stats --json | awk -F: '/"aers_armed"/ { v = $2 + 0; print v; exit }')
c "the daemon keeps AERs armed on QEMU's controller (got '$aers')" [ "${aers:-0}" -gt 0 ]
c "host set smart_critical_warning = 1 (spare)" ask_host warn-spare
c "spare below threshold in the metrics" crit_wait spare 1
t "status names the warning" ok '"critical_warnings": \[' ctl status --json
t "smart-log shows it" ok "^critical_warning +: 1$" ctl smart-log nvme0
c "host set smart_critical_warning = 3 (spare, temperature)" ask_host warn-temp
c "temperature warning in the metrics" crit_wait temperature 1
c "the log names each warning once" sh -c "[ \$(grep -c 'SMART critical warning: spare ' $LOG) = 1 ] &&
	[ \$(grep -c 'SMART critical warning: temperature ' $LOG) = 1 ]"
c "host cleared smart_critical_warning" ask_host warn-clear
# no event clears a warning: the next timed read (health_interval = 1) does
c "cleared in the metrics by the next health read" crit_wait spare 0
c "... and logged" grep -q "SMART critical warning cleared: spare, temperature" $LOG

echo "== (a) commands slower than io_timeout_ms"
fio_bg 30
sleep 2
c "host throttled the namespace" ask_host throttle-on
# throttled until commands have timed out (not for a fixed time: an emulated
# guest on a loaded host runs at any speed)
i=0
while [ "$(rstat timeouts)" = 0 ] && [ $i -lt 60 ] && alive $FIO; do sleep 1; i=$((i + 1)); done
c "commands timed out while throttled" [ "$(rstat timeouts)" -gt 0 ]
sleep 2
c "host lifted the throttle" ask_host throttle-off
fio_end 180
err=$FIO_ERR
far=$(rstat failed_after_retries)
echo "fio: error $err; timeouts $(rstat timeouts), aborts $(rstat aborts_sent)/$(rstat aborts_ok), resets $(rstat resets_started)/$(rstat resets_ok)/$(rstat resets_failed), resubmitted $(rstat resubmitted), failed after retries $far"
c "fio ended (no hang), no verify mismatch, error 0 or EIO from spent retries (got $err)" \
	sh -c "[ '$err' = 0 ] || { [ '$err' = 5 ] && [ '$far' -gt 0 ]; }"
i=0
while [ "$(state)" != live ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
c "controller live again ($(state))" [ "$(state)" = live ]
t "cmp after the slowness: the data is intact" ok "" cmp_back
head -c $((4 << 20)) /dev/urandom > $W/data
t "dd 4 MiB after the slowness" ok "" $DD if=$W/data of="$F" bs=1M seek=40 oflag=direct conv=notrunc status=none
t "cmp" ok "" cmp_back

echo "== (b) PCIe errors (AER) at the root port above the controller, under load"
RP=$(basename "$(dirname "$(readlink -f /sys/bus/pci/devices/$BDF)")")
echo "root port: $RP"
# klog: the kernel's lines since the last call to $W/klog (and indented on
# the console); not in a subshell, so that it remembers where it was
kseen=$(dmesg | wc -l)
klog() {
	dmesg > $W/dmesg
	tail -n +$((kseen + 1)) $W/dmesg > $W/klog
	kseen=$(wc -l < $W/dmesg)
	sed 's/^/    kernel: /' $W/klog
}
# reset_over P: wait (up to 30 s) until a reset has ended (resets_ok or
# resets_failed grew) since counters P was taken
reset_over() {
	i=0
	while [ $i -lt 300 ]; do
		counters w
		eval "[ \$((w_resets_ok + w_resets_failed)) -gt \$((${1}_resets_ok + ${1}_resets_failed)) ]" &&
			return 0
		usleep 100000
		i=$((i + 1))
	done
	return 1
}
counters b0
# fio runs until stopped, so that the reset surely happens under load
fio_bg 600
sleep 2
c "host injected a correctable error (RCVR) at $RP" ask_host aer-cor
sleep 3
klog
counters b1
c "the daemon was not told of the correctable error" sh -c "! grep -q 'PCIe error reported' $LOG"
# (a reset after a command timeout would be no fault of the error: a guest
# on a loaded host can be slow enough for one)
c "a correctable error resets nothing (resets_started $b0_resets_started -> $b1_resets_started, timeouts $b0_timeouts -> $b1_timeouts)" \
	sh -c "[ $b1_resets_started = $b0_resets_started ] || [ $b1_timeouts != $b0_timeouts ]"
c "host injected an uncorrectable non-fatal error (COMP_TIME) at $RP" ask_host aer-nonfatal
t0=$(ms)
reset_over b1
t1=$(ms)
echo "measure: injection acknowledged to reset over: $((t1 - t0)) ms"
klog
c "the guest's AER driver took the error from $RP" \
	grep -q "AER: Uncorrected (Non-Fatal) error message received from $RP" $W/klog
c "... and its recovery of the devices below the port succeeded" \
	grep -q "$RP: AER: device recovery successful" $W/klog
grep -A 3 "PCIe error reported" "$LOG" | sed 's/^/    daemon: /'
c "the daemon logged the PCIe error and reset the controller" \
	grep -q "PCIe error reported (AER): resetting the controller" "$LOG"
counters b2
sleep 2
counters b3
c "fio was still running 2 s after the reset" alive $FIO
c "commands were submitted from the injection to the reset ($b1_submitted -> $b2_submitted) and after it (-> $b3_submitted)" \
	sh -c "[ $b1_submitted -lt $b2_submitted ] && [ $b2_submitted -lt $b3_submitted ]"
kill -INT $FIO
fio_end 120
err=$FIO_ERR
counters b4
echo "fio: error $err; while the PCIe errors were injected: resets $((b4_resets_started - b0_resets_started)) started, $((b4_resets_ok - b0_resets_ok)) ok, $((b4_resets_failed - b0_resets_failed)) failed; $((b4_resubmitted - b0_resubmitted)) commands resubmitted, $((b4_timeouts - b0_timeouts)) timeouts, $((b4_failed_after_retries - b0_failed_after_retries)) failed after retries"
# by exactly one unless commands timed out meanwhile
c "resets_started grew by 1 ($b1_resets_started -> $b4_resets_started, timeouts $b1_timeouts -> $b4_timeouts)" \
	sh -c "[ $b4_resets_started = $((b1_resets_started + 1)) ] || { [ $b4_resets_started -gt $b1_resets_started ] && [ $b4_timeouts != $b1_timeouts ]; }"
c "... and every reset succeeded (resets_ok $b1_resets_ok -> $b4_resets_ok)" \
	sh -c "[ $((b4_resets_ok - b1_resets_ok)) = $((b4_resets_started - b1_resets_started)) ] && [ $b4_resets_failed = $b1_resets_failed ]"
# EIO only from commands whose retries ran out after timeouts (as in (a)),
# never from the reset itself
c "fio ended (no hang), no verify mismatch, no error but EIO from spent retries (got $err)" \
	sh -c "[ '$err' = 0 ] || { [ '$err' = 5 ] && [ $b4_failed_after_retries -gt $b1_failed_after_retries ]; }"
c "controller live ($(state))" [ "$(state)" = live ]
t "cmp after the PCIe errors: the data is intact" ok "" cmp_back
head -c $((4 << 20)) /dev/urandom > $W/data
t "dd 4 MiB after the PCIe errors" ok "" $DD if=$W/data of="$F" bs=1M seek=40 oflag=direct conv=notrunc status=none
t "cmp" ok "" cmp_back

echo "== (c) hot removal under load"
fio_bg 60
sleep 3
t0=$(ms)
c "host sent device_del" ask_host remove
i=0
while [ -e /sys/bus/pci/devices/$BDF ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
t1=$(ms)
c "the guest's removal completed: $BDF left /sys/bus/pci ($((t1 - t0)) ms after device_del)" [ ! -e /sys/bus/pci/devices/$BDF ]
echo "measure: device_del to removal complete: $((t1 - t0)) ms"
fio_end 60
err=$FIO_ERR
t2=$(ms)
echo "measure: fio ended $((t2 - t0)) ms after device_del, error $err"
c "fio ended with EIO, no verify mismatch (got $err)" [ "$err" = 5 ]
c "the daemon survived" alive $DPID
c "status says removed" [ "$(state)" = removed ]
c "the file is still there" [ -f "$F" ]
to0=$(rstat timeouts)
t0=$(ms)
t "a read fails with EIO" fail "Input/output error" $DD if="$F" of=/dev/null bs=4k count=1 iflag=direct
t1=$(ms)
echo "measure: read of the removed controller failed in $((t1 - t0)) ms"
c "... at once: no timeout waited for ($((t1 - t0)) ms)" [ "$(rstat timeouts)" = "$to0" ]
grep -E "removed|request IRQ|asks for the device" "$LOG" | sed 's/^/    daemon: /'

# wait (up to 30 s) until the function is back: the host acknowledges once
# device_add returned, the guest may still be probing it
wait_back() {
	i=0
	while [ ! -e /sys/bus/pci/devices/$BDF ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
	[ -e /sys/bus/pci/devices/$BDF ]
}
# the logical block size the kernel's nvme driver sees on the function (it
# binds first when the function comes back), or nothing within 20 s
kernel_lbs() {
	i=0
	while [ $i -lt 200 ]; do
		for q in /sys/bus/pci/devices/$BDF/nvme/nvme*/nvme*n1/queue/logical_block_size; do
			[ -r "$q" ] && { cat "$q"; return 0; }
		done
		usleep 100000
		i=$((i + 1))
	done
	return 1
}
# plugged_back LBS: the function is back, its namespace has LBS-byte blocks,
# and it is moved to vfio-pci
plugged_back() {
	c "$BDF is back in /sys/bus/pci" wait_back
	lbs=$(kernel_lbs)
	c "the kernel sees the namespace with $1-byte blocks (got $lbs)" [ "$lbs" = $1 ]
	t "vfio-bind gives it to vfio-pci" ok "bound to vfio-pci" vfio-bind $BDF
}
fsize() { stat -c %s "$F"; }

echo "== (d) the controller back with its namespace in another format: attach refused"
sz0=$(fsize)
t "attach while the device is gone: refused" fail "cannot open $BDF through VFIO" ctl attach --wait nvme0
c "host plugged the controller in again, its namespace with 4 KiB blocks" ask_host replug-4k
plugged_back 4096
t "attach: refused, the namespaces changed" fail "the namespaces changed" ctl attach --wait nvme0
grep -E "namespace 1|re-attached" "$LOG" | sed 's/^/    daemon: /'
c "the daemon says which namespace changed" grep -q "nvme0: namespace 1 changed size or format" "$LOG"
c "the daemon is still up" alive $DPID
c "status says removed ($(state))" [ "$(state)" = removed ]
c "the file keeps its size ($(fsize), was $sz0)" [ "$(fsize)" = "$sz0" ]
t "a read fails with EIO" fail "Input/output error" $DD if="$F" of=/dev/null bs=4k count=1 skip=10240 iflag=direct
t "a write fails with EIO" fail "Input/output error" $DD if=/dev/zero of="$F" bs=4k count=1 seek=10240 oflag=direct conv=notrunc

echo "== (e) the original namespace back: attach"
c "host removed the controller and added it with 512-byte blocks" ask_host swap-512
plugged_back 512
t0=$(ms)
t "attach" ok "nvme0: attached, live" ctl attach --wait nvme0
t1=$(ms)
echo "measure: attach took $((t1 - t0)) ms"
t "the data written before the removal reads back" ok "" cmp_back
head -c $((4 << 20)) /dev/urandom > $W/data
t "dd 4 MiB after attach" ok "" $DD if=$W/data of="$F" bs=1M seek=40 oflag=direct conv=notrunc status=none
t "cmp" ok "" cmp_back
# attach wired the error IRQ to the daemon again
counters e0
c "host injected an uncorrectable non-fatal error (COMP_TIME) at $RP again" ask_host aer-again
reset_over e0
counters e1
c "after attach, a PCIe error still resets the controller (resets_ok $e0_resets_ok -> $e1_resets_ok)" \
	sh -c "[ $e1_resets_ok -gt $e0_resets_ok ] && [ \$(grep -c 'PCIe error reported (AER): resetting the controller' $LOG) = 2 ]"
t "cmp after that reset" ok "" cmp_back

echo "== (f) 4 KiB blocks again, attach refused, then SIGTERM"
c "host removed the controller and added it with 4 KiB blocks" ask_host swap-4k
c "the daemon let go of it (status $(state))" [ "$(state)" = removed ]
plugged_back 4096
t "attach: refused again" fail "the namespaces changed" ctl attach --wait nvme0
t "a read fails with EIO" fail "Input/output error" $DD if="$F" of=/dev/null bs=4k count=1 skip=10240 iflag=direct
kill -TERM $DPID
i=0
while alive $DPID && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
alive $DPID && kill -9 $DPID
wait $DPID
rc=$?
c "SIGTERM: daemon exit 0 (got $rc)" [ $rc = 0 ]
c "... the mount is gone" sh -c "! grep -q ' $MNT ' /proc/mounts"
tail -n 5 "$LOG" | sed 's/^/    daemon: /'
echo "checks: $n_ok ok, $n_bad not ok"
[ $n_bad = 0 ]
