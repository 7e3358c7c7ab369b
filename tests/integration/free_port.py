#!/usr/bin/env python3
"""Print a TCP port on 127.0.0.1 that is free now and outside the kernel's
ephemeral range, so that no socket bound to port 0 later (a plugin's
listener in the same test, say) can be handed the same port before the
test binds it.  (A port from bind(0) is in that range: it was seen given
to a gateway's ucx+tcp listener an instant before the gateway's admin
interface bound it.)

A port is free only until someone binds it, and a test asks for several
before it starts the process that binds them: two draws could return the
same port (gw-chaos-threads drew its admin port and its ucx+tcp port
equal, 1 run in 11 rounds of 11 tests).  With $CW_PORT_REGISTRY (a file;
meson test sets one in the build tree, gw_lib.sh one in the test's own
directory otherwise) every port handed out is written there under a lock,
and none handed out in the last 10 minutes is handed out again, by this
test or by another running beside it."""
import fcntl
import os
import random
import socket
import time

HOLD_S = 600


def bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def main():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    base = max(1024, low - 12000)
    reg = os.environ.get("CW_PORT_REGISTRY")
    f = open(reg, "a+") if reg else None
    taken = {}
    now = time.time()
    if f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                try:
                    t = float(parts[1])
                except ValueError:
                    continue
                if now - t < HOLD_S:
                    taken[int(parts[0])] = t
    for _ in range(500):
        port = random.randrange(base, low)
        if port in taken or not bindable(port):
            continue
        if f:
            taken[port] = now
            f.seek(0)
            f.truncate()
            f.write("".join("%d %.3f\n" % kv for kv in taken.items()))
            f.flush()
        print(port)
        return
    raise SystemExit("no free port below the ephemeral range")


main()
