#!/usr/bin/env python3
"""Print a TCP port on 127.0.0.1 that is free now and outside the kernel's
ephemeral range, so that no socket bound to port 0 later (a plugin's
listener in the same test, say) can be handed the same port before the
test binds it.  (A port from bind(0) is in that range: it was seen given
to a gateway's ucx+tcp listener an instant before the gateway's admin
interface bound it.)"""
import random
import socket

with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    low = int(f.read().split()[0])
base = max(1024, low - 12000)
for _ in range(500):
    port = random.randrange(base, low)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free port below the ephemeral range")
