#!/bin/sh
# t-export-nbd.sh - a namespace file served over NBD by the engines an
# operator runs (scripts/nvmefs-export, the command nvmefs-nbd@.service
# runs): qemu-storage-daemon and nbdkit's file plugin, each over a UNIX
# socket and over TCP on 127.0.0.1, nvmefsd under the fd-store stand-in.
# For each of the four:
# - the server detaches only once it listens (the unit's Type=forking);
# - fio's nbd engine (libnbd) writes 4k-128k at random, iodepth 16, and
#   verifies it with crc32c: error 0, every byte verified;
# - nbdcopy writes a random image through the export: the namespace file
#   (the local path) then holds it (cmp), `qemu-img compare` finds the
#   export and the local file identical, and nbdcopy reads the export back
#   into a file that is the namespace's bytes (cmp);
# - writes without a flush send no Flush to the device; a client's flush
#   (fio --fsync) reaches the software controller as NVMe Flush commands
#   (the daemon's flushes_sent and the controller's own flush counter);
# - SIGTERM ends the server.
# Then on /dev/fuse only (over io_uring TLS would test the same again, and
# connections are not adopted after a crash):
# - TLS, each engine on a UNIX socket: with a pre-shared key (keys.psk), a
#   client without TLS or with a key not in the file is refused, clients
#   with one of its keys read the namespace file's bytes; with X.509
#   certificates (openssl makes a CA, a server and a client certificate), a
#   client without TLS or without a certificate is refused, one with it is
#   served;
# - nvmefsd is killed with -9 EXPORT_KILLS (2) times under fio through each
#   engine (qemu-storage-daemon on its UNIX socket, nbdkit on TCP), each
#   kill while the device holds commands 50 ms: fio ends with error 0 and
#   every byte verified; its longest completion (the pause) goes to the log.
. "$(dirname "$0")/lib.sh"
lib_init
. "$(dirname "$0")/fdstore-lib.sh"
for t in qemu-storage-daemon nbdkit nbdcopy nbdinfo qemu-img fio; do
	command -v $t >/dev/null || skip "$t missing (scripts/deps.sh test installs it)"
done
fio --enghelp=nbd >/dev/null 2>&1 || skip "this fio has no nbd engine"
X=$ROOT/scripts/nvmefs-export
SEED=${EXPORT_SEED:-1}
KILLS=${EXPORT_KILLS:-2}
export NVMEFS_EXPORT_RUNDIR=$TMP/run NVMEFS_EXPORT_CONFDIR=$TMP/export
mkdir -p "$NVMEFS_EXPORT_CONFDIR"
conf_sim nvme0 48M block_size=4096 "backing=$TMP/%c-%n.img" exec=thread
store_start -a -n $((KILLS * 2 + 3)) || finish
F=$MNT/nvme0n1
CTL="$BUILD/nvmefsctl -s $TMP/admin.sock"
EPID=

# a free TCP port on the loopback
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# export_start NAME ENGINE LISTEN [CONF-LINE...]: the shipped command, as
# the unit runs it; it must return only once the server listens, with its
# pid written.  URI is the export's (TLS: PSK as $TMP/tls/keys.psk's alice,
# X.509 with the certificates in $TMP/x509), PLAIN the same without TLS
export_start() {
	n=$1 e=$2 l=$3
	shift 3
	printf 'FILE=%s\nENGINE=%s\nLISTEN=%s\n' "$F" "$e" "$l" > "$NVMEFS_EXPORT_CONFDIR/$n.conf"
	printf '%s\n' "$@" >> "$NVMEFS_EXPORT_CONFDIR/$n.conf"
	"$X" nbd "$n" > "$TMP/export.out" 2>&1 || { fail "$n: nvmefs-export exit $?: $(cat "$TMP/export.out")"; return 1; }
	EPID=$(cat "$NVMEFS_EXPORT_RUNDIR/$n.pid" 2>/dev/null)
	kill -0 "$EPID" 2>/dev/null || { fail "$n: no server running after the start (pid '$EPID')"; return 1; }
	case $l in
	unix:*) URI="nbd+unix:///$n?socket=${l#unix:}" ;;
	tcp:*) URI="nbd://${l#tcp:}/$n" ;;
	esac
	PLAIN=$URI
	if grep -q '^TLS=psk' "$NVMEFS_EXPORT_CONFDIR/$n.conf"; then
		# the PSK identity is the URI's user
		URI="nbds${URI#nbd}"
		URI="${URI%%://*}://alice@${URI#*://}"
		case $URI in
		*\?*) URI="$URI&tls-psk-file=$TMP/tls/keys.psk" ;;
		*) URI="$URI?tls-psk-file=$TMP/tls/keys.psk" ;;
		esac
	elif grep -q '^TLS=x509' "$NVMEFS_EXPORT_CONFDIR/$n.conf"; then
		URI="nbds${URI#nbd}"
		case $URI in
		*\?*) URI="$URI&tls-certificates=$TMP/x509" ;;
		*) URI="$URI?tls-certificates=$TMP/x509" ;;
		esac
	fi
	set -- "$n"
	# listening already: the first connection must succeed
	nbdinfo --size "$URI" > "$TMP/size" 2>&1 || fail "$1: nobody listens when the start returned: $(cat "$TMP/size")"
	[ "$(cat "$TMP/size")" = $((48 << 20)) ] || fail "$1: export size $(cat "$TMP/size")"
}

export_stop() {
	[ -n "$EPID" ] || return 0
	kill -TERM "$EPID"
	i=0
	while kill -0 "$EPID" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -0 "$EPID" 2>/dev/null && fail "the server (pid $EPID) did not end on SIGTERM"
	EPID=
}
trap 'if [ -n "$EPID" ]; then kill -9 "$EPID" 2>/dev/null; fi
	if [ -n "$SPID" ]; then kill -9 "$SPID" 2>/dev/null; fi; lib_cleanup' EXIT

# stat_fuse KEY: a figure of the daemon's FUSE front end (nvmefsctl stats)
stat_fuse() {
	$CTL stats --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["fuse"][sys.argv[1]])' "$1"
}

# fio_nbd NAME ARGS...: fio's nbd engine on $URI; JSON in $TMP/NAME.json
fio_nbd() {
	n=$1
	shift
	fio --name="$n" --ioengine=nbd --uri="$URI" --output-format=json --output="$TMP/$n.json" \
		"$@" > "$TMP/$n.err" 2>&1
}

# fio_ok NAME BYTES: fio exited 0 (in $frc), error 0, wrote and verified BYTES
fio_ok() {
	python3 - "$TMP/$1.json" "$2" <<'PY' || { fail "$1: fio: $(cat "$TMP/$1.err")"; return 1; }
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
w, r = j["write"], j["read"]
print("%s: fio error %d, wrote %d MiB, verified %d MiB; longest completion: write %.1f ms, read %.1f ms"
      % (j["jobname"], j["error"], w["io_bytes"] >> 20, r["io_bytes"] >> 20, w["clat_ns"]["max"] / 1e6,
         r["clat_ns"]["max"] / 1e6))
want = int(sys.argv[2])
sys.exit(j["error"] != 0 or w["io_bytes"] != want or r["io_bytes"] != want)
PY
	[ "$frc" = 0 ] || fail "$1: fio exit $frc: $(cat "$TMP/$1.err")"
	if grep -Eiq "verify|error" "$TMP/$1.err"; then fail "$1: fio said: $(cat "$TMP/$1.err")"; fi
}

head -c $((48 << 20)) /dev/urandom > "$TMP/image"
for engine in qemu nbdkit; do
	for how in unix tcp; do
		name=$engine-$how
		case $how in
		unix) listen=unix:$NVMEFS_EXPORT_RUNDIR/$name.sock ;;
		tcp) listen=tcp:127.0.0.1:$(free_port) ;;
		esac
		export_start "$name" $engine "$listen" || continue
		echo "== $name: $URI (pid $EPID)"
		# fio verify through the export
		fio_nbd "$name" --rw=randwrite --bsrange=4k-128k --iodepth=16 --size=8M \
			--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --randseed=$SEED
		frc=$?
		fio_ok "$name" $((8 << 20))
		# a whole image through the export, checked through the local file
		nbdcopy --flush "$TMP/image" "$URI" || fail "$name: nbdcopy to the export"
		cmp "$TMP/image" "$F" || fail "$name: the namespace file is not what nbdcopy wrote"
		qemu-img compare -U -f raw -F raw "$URI" "$F" > "$TMP/cmp.out" 2>&1 ||
			fail "$name: qemu-img compare: $(cat "$TMP/cmp.out")"
		rm -f "$TMP/back"
		nbdcopy "$URI" "$TMP/back" || fail "$name: nbdcopy from the export"
		cmp "$TMP/back" "$F" || fail "$name: what the export reads is not the namespace file"
		# flushes: none without a client's flush, some with it
		f0=$(stat_fuse flushes_sent)
		s0=$(sim_stat nvme0 flushes)
		fio_nbd "$name-nosync" --rw=randwrite --bs=4k --iodepth=8 --size=1M --randseed=$SEED
		f1=$(stat_fuse flushes_sent)
		s1=$(sim_stat nvme0 flushes)
		fio_nbd "$name-fsync" --rw=randwrite --bs=4k --iodepth=8 --size=1M --fsync=32 --randseed=$SEED
		f2=$(stat_fuse flushes_sent)
		s2=$(sim_stat nvme0 flushes)
		echo "$name: Flush commands: $((f1 - f0)) after 256 writes, $((f2 - f1)) after 256 writes with a flush every 32 (device: $((s1 - s0)), $((s2 - s1)))"
		[ "$f1" = "$f0" ] && [ "$s1" = "$s0" ] || fail "$name: writes without a flush sent a Flush"
		[ "$f2" -gt "$f1" ] || fail "$name: the client's flushes sent no Flush"
		[ "$s2" -gt "$s1" ] || fail "$name: no Flush reached the device"
		export_stop
	done
done

if [ "${FUSE_TRANSPORT:-auto}" = uring ]; then
	# TLS is the servers' business, the same over either FUSE transport;
	# and connections over io_uring are not adopted after a crash
	echo "(FUSE over io_uring: TLS is tried on /dev/fuse only; no kills)"
	store_stop
	finish
fi

# ---- TLS with a pre-shared key: a client without TLS is refused, one with
# a key of keys.psk reads what the namespace file holds (alice and bob: the
# file is the list of who may connect; QEMU 7.2 applies no tls-authz to a
# PSK identity), one with a key not in it is refused
mkdir -m 700 "$TMP/tls"
printf 'alice:%s\nbob:%s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" \
	"$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$TMP/tls/keys.psk"
printf 'eve:%s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$TMP/eve.psk"
for engine in qemu nbdkit; do
	name=$engine-psk
	export_start $name $engine unix:$NVMEFS_EXPORT_RUNDIR/$name.sock TLS=psk "TLS_DIR=$TMP/tls" || continue
	nbdinfo --size "$PLAIN" > "$TMP/plain.out" 2>&1 && fail "$name: a client without TLS was served"
	rm -f "$TMP/back"
	nbdcopy "$URI" "$TMP/back" || fail "$name: nbdcopy over TLS"
	cmp "$TMP/back" "$F" || fail "$name: what the export reads over TLS is not the namespace file"
	nbdinfo --size "$(echo "$URI" | sed 's|://alice@|://bob@|')" > "$TMP/bob.out" 2>&1 ||
		fail "$name: bob's key (in keys.psk) was refused: $(cat "$TMP/bob.out")"
	nbdinfo --size "$(echo "$URI" | sed "s|tls-psk-file=[^&]*|tls-psk-file=$TMP/eve.psk|; s|://alice@|://eve@|")" \
		> "$TMP/eve.out" 2>&1 && fail "$name: a key not in keys.psk was let in"
	echo "$name: plain client refused ($(head -n 1 "$TMP/plain.out")), unknown key refused ($(head -n 1 "$TMP/eve.out")), PSK clients served"
	export_stop
done

# ---- TLS with X.509 certificates (TLS_VERIFY_PEER=yes, the default): a
# client with a certificate of the CA is served, one without is refused
if command -v openssl > /dev/null; then
	C=$TMP/x509
	mkdir -m 700 "$C" "$TMP/nocert"
	(
		cd "$C" || exit 1
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca-cert.pem -days 2 \
			-subj /CN=nvmefs-test-ca &&
			openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out s.csr -subj /CN=localhost &&
			printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > s.ext &&
			openssl x509 -req -in s.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
				-out server-cert.pem -days 2 -extfile s.ext &&
			openssl req -newkey rsa:2048 -nodes -keyout client-key.pem -out c.csr -subj /CN=client1 &&
			printf 'extendedKeyUsage=clientAuth\n' > c.ext &&
			openssl x509 -req -in c.csr -CA ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
				-out client-cert.pem -days 2 -extfile c.ext
	) > "$TMP/openssl.out" 2>&1 || fail "openssl: $(tail -n 3 "$TMP/openssl.out")"
	cp "$C/ca-cert.pem" "$TMP/nocert/"
	for engine in qemu nbdkit; do
		name=$engine-x509
		export_start $name $engine unix:$NVMEFS_EXPORT_RUNDIR/$name.sock TLS=x509 "TLS_DIR=$C" || continue
		nbdinfo --size "$PLAIN" > "$TMP/plain.out" 2>&1 && fail "$name: a client without TLS was served"
		rm -f "$TMP/back"
		nbdcopy "$URI" "$TMP/back" || fail "$name: nbdcopy over TLS"
		cmp "$TMP/back" "$F" || fail "$name: what the export reads over TLS is not the namespace file"
		nbdinfo --size "nbds${PLAIN#nbd}&tls-certificates=$TMP/nocert" > "$TMP/nocert.out" 2>&1 &&
			fail "$name: a client without a certificate was served"
		echo "$name: plain client refused, client without a certificate refused ($(head -n 1 "$TMP/nocert.out")), client with one served"
		export_stop
	done
else
	echo "(openssl missing: X.509 not tried)"
fi

# ---- kill -9 of nvmefsd under fio through the export
# the write phase lasts about as long as the kills take (each restart
# adopts within a second here)
WRATE=$((32 * 1024 * 10 / (KILLS * 13 + 15)))
resent=0
k=0
for name in qemu-unix nbdkit-tcp; do
	case $name in
	qemu-unix) export_start $name qemu unix:$NVMEFS_EXPORT_RUNDIR/$name.sock || continue ;;
	nbdkit-tcp) export_start $name nbdkit tcp:127.0.0.1:$(free_port) || continue ;;
	esac
	echo "== kill -9 under fio through $name"
	timeout -k 5 $((60 + KILLS * 10)) fio --name="$name-kill" --ioengine=nbd --uri="$URI" \
		--rw=randwrite --bssplit=4k/40:16k/30:64k/20:128k/10 --iodepth=16 --size=32M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --rate=,"$WRATE"k --randseed=$((SEED + 1000)) \
		--output-format=json --output="$TMP/$name-kill.json" > "$TMP/$name-kill.err" 2>&1 &
	FP=$!
	DELAYS=$(awk -v s="$SEED$k" -v n="$KILLS" \
		'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%.2f ", 0.5 + rand() * 1.0 }')
	for t in $DELAYS; do
		sleep "$t"
		kill -0 "$FP" 2>/dev/null || { fail "$name: fio ended before kill $((k + 1)) (make it longer)"; break; }
		[ $k -gt 0 ] && resent_now
		# commands wait 50 ms in the device: the kill finds requests
		# taken and sent, not answered
		$CTL inject nvme0 delay 50 > /dev/null || fail "inject delay"
		sleep 0.2
		kill -9 "$DPID"
		k=$((k + 1))
		new_pid
		wait_for "the kernel resends the requests" $k 15 || { fail "kill $k: not adopted within 15 s"; break; }
	done
	wait "$FP"
	frc=$?
	fio_ok "$name-kill" $((32 << 20))
	kill -0 "$EPID" 2>/dev/null || fail "$name: the server died"
	export_stop
done
resent_now
n=$(grep -c "adopting FUSE connection" "$LOG")
echo "$k kills, $n adoptions, $resent requests resent"
[ "$n" = $((KILLS * 2)) ] || fail "$n adoptions for $((KILLS * 2)) kills"
[ "$resent" -gt 0 ] || fail "no request was resent"
grep -q "not adopting" "$LOG" && fail "an adoption was refused: $(grep "not adopting" "$LOG")"
store_stop
[ "$SRC" = 0 ] || fail "stop: exit $SRC"
grep -E "fdstore: pid [0-9]+ exited [1-9]" "$LOG" && fail "a run failed"
grep -E "Sanitizer|runtime error" "$LOG" && fail "sanitizer report"
finish
