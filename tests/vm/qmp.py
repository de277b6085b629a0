#!/usr/bin/env python3
"""qmp.py - one QMP command to a QEMU started with vmrun.sh -q SOCKET.

Usage: qmp.py SOCKET COMMAND [ARGUMENTS-JSON] [--event NAME] [--timeout SECS]

Connects (waiting up to --timeout for the socket), negotiates capabilities,
sends COMMAND with ARGUMENTS, prints the reply's "return" as JSON and exits 0,
or prints the error and exits 1.  With --event NAME it then waits (same
timeout) for that asynchronous event, prints it and exits 0, or exits 2 when
it does not come.  Python standard library only.
"""
import json
import socket
import sys
import time


def main():
    args = sys.argv[1:]
    timeout, event = 30.0, None
    if "--timeout" in args:
        i = args.index("--timeout")
        timeout = float(args[i + 1])
        del args[i:i + 2]
    if "--event" in args:
        i = args.index("--event")
        event = args[i + 1]
        del args[i:i + 2]
    if len(args) not in (2, 3):
        sys.stderr.write(__doc__)
        return 64
    path, cmd = args[0], args[1]
    arguments = json.loads(args[2]) if len(args) == 3 else None
    deadline = time.monotonic() + timeout

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            sock.connect(path)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                print("qmp: cannot connect to %s: %s" % (path, e))
                return 1
            time.sleep(0.1)
    f = sock.makefile("rw")

    def read():
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        line = f.readline()
        if not line:
            raise EOFError("QEMU closed the QMP socket")
        return json.loads(line)

    def call(name, a=None):
        msg = {"execute": name}
        if a is not None:
            msg["arguments"] = a
        f.write(json.dumps(msg) + "\n")
        f.flush()
        while True:
            r = read()
            if "return" in r or "error" in r:
                return r
            if event and r.get("event") == event:
                pending.append(r)

    pending = []
    try:
        read()  # the greeting
        r = call("qmp_capabilities")
        if "error" in r:
            print("qmp: qmp_capabilities: %s" % r["error"])
            return 1
        r = call(cmd, arguments)
        if "error" in r:
            print("qmp: %s: %s" % (cmd, r["error"].get("desc", r["error"])))
            return 1
        print(json.dumps(r["return"]))
        if event:
            while not pending:
                r = read()
                if r.get("event") == event:
                    pending.append(r)
            print(json.dumps(pending[0]))
    except (socket.timeout, TimeoutError):
        print("qmp: no %s within %.0f s" % ("event " + event if event else "reply", timeout))
        return 2
    except (EOFError, OSError, ValueError) as e:
        print("qmp: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
