#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where a guest's CPU goes, by sampling: ask QEMU's human monitor for the
registers of the (first) vCPU every INTERVAL seconds until QEMU exits, and
count the samples by kernel function (from System.map), user space, module
code and halted (idle). Writes the table, most samples first, to OUT, and
rewrites it every 500 samples (a session killed early keeps its profile).

usage: guest-profile.py MONITOR-SOCKET SYSTEM.MAP OUT [INTERVAL]

Each sample stops the vCPU briefly: the guest runs a little slower while it
is profiled (PROFILE=1 make check), so times of a profiled run are not the
suite's."""

import bisect
import collections
import os
import re
import socket
import sys
import time


def symbols(path):
    """The text symbols of System.map, sorted by address."""
    syms = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[1] in "tTwW":
                syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def connect(path):
    for _ in range(300):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            return s
        except OSError:
            time.sleep(0.1)
    sys.exit(f"no monitor at {path}")


def reply(s):
    """Read to the monitor's prompt."""
    buf = b""
    while not buf.endswith(b"(qemu) "):
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError
        buf += chunk
    return buf.decode(errors="replace")


def write(out, counts, n):
    with open(out + ".tmp", "w") as f:
        f.write(f"{n} samples\n")
        for name, c in counts.most_common(100):
            f.write(f"{c:7d} {100 * c / max(n, 1):5.1f}% {name}\n")
    os.replace(out + ".tmp", out)


def main():
    sock, sysmap, out = sys.argv[1:4]
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 0.02
    addrs, names = symbols(sysmap)
    end = addrs[-1] if addrs else 0
    s = connect(sock)
    counts = collections.Counter()
    n = 0
    try:
        reply(s)
        while True:
            s.sendall(b"info registers\n")
            r = reply(s)
            rip = re.search(r"RIP=([0-9a-f]+)", r)
            if not rip:
                continue
            rip = int(rip.group(1), 16)
            if re.search(r"HLT=1", r):
                name = "[halted]"
            elif re.search(r"CPL=3", r):
                name = "[user]"
            elif rip > end:
                name = "[module]"
            else:
                i = bisect.bisect_right(addrs, rip) - 1
                name = names[i] if i >= 0 else "[unknown]"
            counts[name] += 1
            n += 1
            if n % 500 == 0:
                write(out, counts, n)
            time.sleep(interval)
    except (EOFError, OSError):
        pass
    write(out, counts, n)


if __name__ == "__main__":
    main()
