#!/usr/bin/env python3
"""cw-info --json and its options (TAP).

    test_cw_info.py CW_INFO VERBS_FAKE_MODULE

Every --json output parses (json.load); each plugin names the file it was
loaded from; the plugins built here (CW_TEST_PLUGINS) report the library
they run with (libfabric, UCX, libibverbs with the rdma-core release) and
what it finds (libfabric providers and domains, UCX transports and
devices, the fake verbs devices); options and URIs go in any order; a
URI that cannot be opened is an entry with ok false and exit status 1; an
unknown option is exit status 2; the text output explains the RMA size
limit instead of "max 0 B/op"."""
import json
import os
import re
import subprocess
import sys

CW_INFO, FAKE = sys.argv[1], sys.argv[2]
BUILT = [p for p in os.environ.get("CW_TEST_PLUGINS", "shm").split(",") if p]
results = []


def check(ok, what):
    results.append((bool(ok), what))


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([CW_INFO, *args], capture_output=True, text=True,
                          timeout=60, env=e)


def parse(p, what):
    try:
        return json.loads(p.stdout)
    except ValueError as err:
        check(False, f"{what}: not JSON ({err}): {p.stdout[:200]!r}")
        return None


p = run("--json", "shm://")
doc = parse(p, "cw-info --json shm://")
if doc is not None:
    check(p.returncode == 0, f"cw-info --json shm:// exits 0 (got {p.returncode})")
    plugins = {x["name"]: x for x in doc["plugins"]}
    check(set(BUILT) <= set(plugins),
          f"plugins {sorted(plugins)} include those built: {BUILT}")
    for name, pl in sorted(plugins.items()):
        check(pl["path"] and os.path.isfile(pl["path"]) and
              os.path.basename(pl["path"]) == f"cw-na-{name}.so",
              f"plugin {name}: its file {pl['path']}")
    expect = {
        "ofi": (r"^libfabric \d+\.\d+$", "providers", "devices"),
        "ucx": (r"^UCX \d+\.\d+\.\d+", "transports", "devices"),
        "verbs": (r"^libibverbs \d+\.\d+ \(rdma-core \d+\.\d+\)$", None, None),
    }
    for name, (lib_re, k1, k2) in expect.items():
        if name not in BUILT:
            continue
        pl = plugins[name]
        check(pl["describe"] == "ok" and
              any(re.match(lib_re, v) for v in pl["libraries"]),
              f"{name}: library {pl['libraries']} (describe {pl['describe']})")
        for k in (k1, k2):
            if k:
                check(len(pl[k]) > 0 and len(set(pl[k])) == len(pl[k]),
                      f"{name}: {len(pl[k])} {k}, each once: {pl[k][:4]}")
    if "ofi" in BUILT:
        pl = plugins["ofi"]
        check(any(d.split("/")[0] in pl["providers"] for d in pl["devices"]),
              "ofi: devices are PROVIDER/DOMAIN of the providers listed")
    check(plugins["shm"]["describe"] == "CW_UNSUPPORTED" and
          plugins["shm"]["libraries"] == [],
          "shm: no network library to report (describe CW_UNSUPPORTED)")
    protos = doc["protocols"]
    check(len(protos) == 1 and protos[0]["uri"] == "shm://" and
          protos[0]["ok"] is True and protos[0]["plugin"] == "shm" and
          protos[0]["self"].startswith("shm://") and
          protos[0]["max_rma_size"] is None and protos[0]["rma"] is True and
          protos[0]["max_segments"] > 0,
          f"shm:// probed: {protos}")
    check(re.match(r"^\d+\.\d+\.\d+$", doc["version"]) and
          doc["plugin_abi"] >= 1, f"version {doc['version']}, ABI {doc['plugin_abi']}")

# Options in any order, URIs between them.
orders = [("shm://", "--json", "-v"), ("-v", "shm://", "--json"),
          ("--json", "--verbose", "shm://")]
for args in orders:
    p = run(*args)
    d = parse(p, " ".join(args))
    check(d is not None and p.returncode == 0 and
          [x["uri"] for x in d["protocols"]] == ["shm://"],
          f"cw-info {' '.join(args)}: JSON, shm:// probed, exit {p.returncode}")
p = run("shm://", "-v")
check(p.returncode == 0 and "shm://" in p.stdout and "protocols:" in p.stdout,
      "cw-info shm:// -v: the text form with -v after the URI")

# A URI that cannot be opened.
p = run("nosuchplugin://", "--json")
d = parse(p, "cw-info nosuchplugin:// --json")
check(d is not None and p.returncode == 1 and
      d["protocols"][0]["ok"] is False and
      d["protocols"][0]["status"] == "CW_NOENT" and d["protocols"][0]["error"],
      f"nosuchplugin://: ok false, CW_NOENT, exit 1 ({p.returncode})")
p = run("--bogus")
check(p.returncode == 2 and "usage: cw-info" in p.stderr,
      f"an unknown option: exit 2 with the usage ({p.returncode})")

# The text form says what the RMA limit is.
p = run("shm://")
check(p.returncode == 0 and "B/op" not in p.stdout and
      "one put/get of any size" in p.stdout and "file: " in p.stdout,
      "text: 'one put/get of any size' instead of 'max 0 B/op', and the file")

# The fake verbs device module: its devices are listed.
if "verbs" in BUILT:
    p = run("--json", "verbs://", env={"CAUSEWAY_VERBS_FAKE": FAKE})
    d = parse(p, "cw-info --json verbs:// (fake devices)")
    if d is not None:
        v = {x["name"]: x for x in d["plugins"]}["verbs"]
        check(p.returncode == 0 and v["devices"][:1] == ["fake0"] and
              d["protocols"][0]["ok"] is True,
              f"verbs with the fake module: devices {v['devices']}, verbs:// opened")

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
