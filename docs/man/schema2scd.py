#!/usr/bin/env python3
"""Render a man page: the scdoc TEMPLATE with its @SCHEMA@ line replaced by
the key reference of `CAUSEWAYD --schema` (Markdown tables), through SCDOC.
    schema2scd.py SCDOC CAUSEWAYD TEMPLATE  > page"""
import re
import subprocess
import sys


def esc(text):
    # scdoc: '*' bolds, '_' underlines, '\' escapes.
    text = text.replace('\\', '\\\\').replace('*', '\\*').replace('_', '\\_')
    return re.sub(r'`([^`]*)`', lambda m: m.group(1), text)


def schema_scd(markdown):
    out = []
    for line in markdown.splitlines():
        if line.startswith('### '):
            out += ['## ' + esc(line[4:]), '']
        elif line.startswith('| `'):
            cells = [c.strip() for c in line.strip('|').split('|')]
            key, typ, default, bounds, reload, help_ = cells[:6]
            facts = [esc(typ)]
            if default == 'required':
                facts.append('required')
            elif default == '(none)':
                facts.append('optional')
            else:
                facts.append('default ' + esc(default))
            if bounds != '-':
                facts.append(('one of ' if typ == 'enum' else '') +
                             esc(bounds))
            facts.append('reload: ' + reload)
            out += ['*%s* (%s)' % (esc(key), ', '.join(facts)),
                    '\t' + esc(help_), '']
        elif line and not line.startswith('|'):
            out += [esc(line), '']
    return '\n'.join(out)


def main():
    scdoc, causewayd, template = sys.argv[1:4]
    schema = subprocess.run([causewayd, '--schema'], check=True,
                            capture_output=True, text=True).stdout
    with open(template) as f:
        page = f.read().replace('@SCHEMA@', schema_scd(schema))
    sys.stdout.write(subprocess.run([scdoc], input=page, check=True,
                                    capture_output=True, text=True).stdout)


main()
