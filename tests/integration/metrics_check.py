#!/usr/bin/env python3
"""Check a Prometheus text exposition (version 0.0.4) read from stdin.

    metrics_check.py [NAME{LABELS}=VALUE ...]

Every line is a HELP, a TYPE or a sample; every sample belongs to a family
whose TYPE came first (declared once); counters end in _total; label
values are quoted and escaped; values are numbers; no series repeats; each
histogram series has increasing le bounds ending at +Inf, cumulative
counts, and a _count equal to its +Inf bucket and a _sum.  Arguments name
samples that must be present with that value ("name" without labels, or
"name{a="x",b="y"}" with exactly those labels in that order).  Prints
"ok N samples" or the first problem, and exits 1 on a problem.
"""
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s(?:,%s)*)?\})? (\S+)$" % (NAME, LABEL, LABEL))
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def number(text, where):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    try:
        return float(text)
    except ValueError:
        fail("%s: value %r is not a number" % (where, text))


def main():
    types, seen, samples = {}, set(), {}
    hists = {}
    for n, line in enumerate(sys.stdin.read().splitlines(), 1):
        where = "line %d" % n
        if line.startswith("# HELP "):
            if not re.match(r"^# HELP %s \S" % NAME, line):
                fail("%s: bad HELP: %r" % (where, line))
            continue
        if line.startswith("# TYPE "):
            m = re.match(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$"
                         % NAME, line)
            if not m:
                fail("%s: bad TYPE: %r" % (where, line))
            if m.group(1) in types:
                fail("%s: TYPE of %s declared twice" % (where, m.group(1)))
            if m.group(2) == "counter" and not m.group(1).endswith("_total"):
                fail("%s: counter %s does not end in _total" % (where, m.group(1)))
            types[m.group(1)] = m.group(2)
            continue
        if line.startswith("#") or line == "":
            fail("%s: unexpected line %r" % (where, line))
        m = SAMPLE.match(line)
        if not m:
            fail("%s: not a sample: %r" % (where, line))
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        v = number(value, where)
        family, part = name, None
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[: -len(suffix)]
            if name.endswith(suffix) and types.get(base) == "histogram":
                family, part = base, suffix
        if family not in types:
            fail("%s: sample of %s before its TYPE" % (where, family))
        key = name + labels
        if key in seen:
            fail("%s: series %s repeated" % (where, key))
        seen.add(key)
        samples[key] = v
        if types[family] in ("counter",) and v < 0:
            fail("%s: counter %s is negative" % (where, key))
        if types[family] == "histogram":
            if part is None:
                fail("%s: histogram sample %s without _bucket/_sum/_count" % (where, name))
            pairs = LABEL_RE.findall(labels)
            le = [val for k, val in pairs if k == "le"]
            rest = ",".join('%s="%s"' % (k, val) for k, val in pairs if k != "le")
            h = hists.setdefault((family, rest), {"b": [], "sum": None, "count": None})
            if part == "_bucket":
                if len(le) != 1:
                    fail("%s: bucket without one le label" % where)
                h["b"].append((number(le[0], where), v))
            elif part == "_sum":
                h["sum"] = v
            else:
                h["count"] = v
    for (family, rest), h in hists.items():
        what = "%s{%s}" % (family, rest)
        if not h["b"] or not math.isinf(h["b"][-1][0]):
            fail("%s: buckets do not end at +Inf" % what)
        for (l0, c0), (l1, c1) in zip(h["b"], h["b"][1:]):
            if not l1 > l0:
                fail("%s: le %g after %g" % (what, l1, l0))
            if c1 < c0:
                fail("%s: bucket count falls from %g to %g" % (what, c0, c1))
        if h["count"] is None or h["sum"] is None:
            fail("%s: no _count or _sum" % what)
        if h["count"] != h["b"][-1][1]:
            fail("%s: _count %g differs from the +Inf bucket %g" % (what, h["count"], h["b"][-1][1]))
    for want in sys.argv[1:]:
        key, _, value = want.rpartition("=")
        if key not in samples:
            fail("no sample %s" % key)
        if samples[key] != float(value):
            fail("%s is %g, expected %s" % (key, samples[key], value))
    print("ok %d samples, %d families, %d histogram series" % (len(samples), len(types), len(hists)))


main()
