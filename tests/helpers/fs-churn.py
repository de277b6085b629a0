#!/usr/bin/env python3
"""fs-churn.py - a file system workload with a model of what it wrote.

    fs-churn.py run DIR SEED SECONDS MODEL   churn in DIR, then write MODEL
    fs-churn.py check DIR MODEL              DIR must hold what MODEL says

run: random operations from a fixed seed (create, write at an offset,
append, truncate, rename, unlink, mkdir, hard link (and unlink of the
old name), fsync, fdatasync, sync) on files of up to 1 MiB in a few directories,
for SECONDS (unlinking while the files hold more than 64 MiB), stopping
at the first error (its errno is printed: ENOTCONN or
EIO from below the file system fails the run).  The model is each file's
SHA-256 and size, and the set of directories, kept in memory as the
operations succeed and written to MODEL at the end.

check: every file and directory under DIR is in the model and the other
way round, each file with its size and digest.  Exit 0 when all matches.
"""
import hashlib
import json
import os
import random
import sys
import time


def digest(data):
    return hashlib.sha256(data).hexdigest()


def run(root, seed, seconds, model_path):
    rnd = random.Random(seed)
    files = {}  # relative path -> bytearray
    dirs = {"."}
    ops = 0
    end = time.monotonic() + seconds

    step = step_ops(rnd, root, files, dirs)
    longest = 0.0
    total = 0
    while True:
        t0 = time.monotonic()
        if t0 >= end:
            break
        if ops % 64 == 0:
            total = sum(len(b) for b in files.values())
        op = rnd.randrange(100)
        if total > 64 << 20 and files:  # room on a small file system
            op = 70
        ops += 1
        step(op)
        longest = max(longest, time.monotonic() - t0)
    model = {"files": {p: [len(b), digest(bytes(b))] for p, b in files.items()},
             "dirs": sorted(dirs)}
    with open(model_path, "w") as f:
        json.dump(model, f)
    print("fs-churn: %d operations, %d files, %d directories, %d bytes; longest operation %.1f ms"
          % (ops, len(files), len(dirs), sum(len(b) for b in files.values()), longest * 1e3))


def step_ops(rnd, root, files, dirs):
    """The operations, as a function of the operation number 0-99."""

    def some_file():
        return rnd.choice(sorted(files)) if files else None

    def new_name():
        d = rnd.choice(sorted(dirs))
        return os.path.normpath(os.path.join(d, "f%d" % rnd.randrange(1 << 30)))

    def step(op):
        if op < 15 or not files:  # create with data
            p = new_name()
            data = rnd.randbytes(rnd.choice((0, 100, 4096, 5000, 65536, 300000)))
            with open(os.path.join(root, p), "wb") as f:
                f.write(data)
            files[p] = bytearray(data)
        elif op < 40:  # write at an offset (may extend)
            p = some_file()
            buf = files[p]
            off = rnd.randrange(len(buf) + 8192)
            data = rnd.randbytes(rnd.choice((1, 512, 4096, 12288, 100000)))
            if off + len(data) > 1 << 20:
                return
            fd = os.open(os.path.join(root, p), os.O_WRONLY)
            try:
                os.pwrite(fd, data, off)
                if rnd.randrange(4) == 0:
                    os.fdatasync(fd)
            finally:
                os.close(fd)
            if off > len(buf):
                buf.extend(bytes(off - len(buf)))
            buf[off:off + len(data)] = data
        elif op < 50:  # append
            p = some_file()
            data = rnd.randbytes(rnd.randrange(1, 20000))
            if len(files[p]) + len(data) > 1 << 20:
                return
            with open(os.path.join(root, p), "ab") as f:
                f.write(data)
            files[p].extend(data)
        elif op < 58:  # truncate
            p = some_file()
            n = rnd.randrange(len(files[p]) + 4096)
            os.truncate(os.path.join(root, p), n)
            buf = files[p]
            if n < len(buf):
                del buf[n:]
            else:
                buf.extend(bytes(n - len(buf)))
        elif op < 66:  # rename, maybe into another directory
            p = some_file()
            q = new_name()
            os.rename(os.path.join(root, p), os.path.join(root, q))
            files[q] = files.pop(p)
        elif op < 74:  # unlink
            p = some_file()
            os.unlink(os.path.join(root, p))
            del files[p]
        elif op < 78 and len(dirs) < 12:  # mkdir
            d = os.path.normpath(os.path.join(rnd.choice(sorted(dirs)), "d%d" % rnd.randrange(1 << 30)))
            os.mkdir(os.path.join(root, d))
            dirs.add(d)
        elif op < 84:  # hard link, then the old name goes: a move through
            p = some_file()  # link counts rather than rename
            q = new_name()
            os.link(os.path.join(root, p), os.path.join(root, q))
            os.unlink(os.path.join(root, p))
            files[q] = files.pop(p)
        elif op < 94:  # fsync of a file
            p = some_file()
            fd = os.open(os.path.join(root, p), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        else:  # every file system
            os.sync()

    return step


def check(root, model_path):
    with open(model_path) as f:
        model = json.load(f)
    want = model["files"]
    bad = 0
    seen_dirs = set()
    seen = set()
    for d, subdirs, names in os.walk(root):
        rel = os.path.normpath(os.path.relpath(d, root))
        if rel == "lost+found" or rel.startswith("lost+found/"):
            continue
        seen_dirs.add(rel)
        for n in names:
            p = os.path.normpath(os.path.join(rel, n))
            seen.add(p)
            if p not in want:
                print("fs-churn: unexpected file", p)
                bad += 1
                continue
            with open(os.path.join(root, p), "rb") as f:
                data = f.read()
            if [len(data), digest(data)] != want[p]:
                print("fs-churn: %s: %d bytes, %s; the model says %d bytes, %s"
                      % (p, len(data), digest(data)[:16], want[p][0], want[p][1][:16]))
                bad += 1
    for p in sorted(set(want) - seen):
        print("fs-churn: missing file", p)
        bad += 1
    if seen_dirs != set(model["dirs"]):
        print("fs-churn: directories differ:", sorted(seen_dirs ^ set(model["dirs"])))
        bad += 1
    print("fs-churn: %d files checked, %d differences" % (len(seen), bad))
    return bad == 0


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "run":
        try:
            run(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
        except OSError as e:
            print("fs-churn: %s (errno %d)" % (e, e.errno))
            return 1
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        return 0 if check(sys.argv[2], sys.argv[3]) else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
