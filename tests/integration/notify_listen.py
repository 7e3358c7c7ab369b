#!/usr/bin/env python3
"""Stands in for systemd's notification socket (sd_notify(3)).

    notify_listen.py ADDR OUT [SECONDS]

Binds a Unix datagram socket at ADDR (a path, or @name for the abstract
namespace), then appends each datagram it receives to OUT as one line,
its newline-separated assignments joined by spaces.  The file OUT exists
(empty) once the socket is bound.  Exits on SIGTERM or after SECONDS
(default 60)."""
import os
import signal
import socket
import sys
import time


def main():
    addr, out = sys.argv[1], sys.argv[2]
    bound = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
    s.settimeout(0.5)
    with open(out + ".tmp", "w"):
        pass
    os.rename(out + ".tmp", out)
    end = time.monotonic() + bound
    with open(out, "a") as f:
        while time.monotonic() < end:
            try:
                data = s.recv(4096)
            except socket.timeout:
                continue
            f.write(" ".join(data.decode("utf-8", "replace").split("\n")) + "\n")
            f.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
