#!/usr/bin/env python3
"""Calls a method of org.l7fast.Manager1 with busctl and prints the reply as
plain JSON (D-Bus variants unwrapped). The D-Bus interface is the stable
contract; l7fastctl's text output is for people.
    dbusq.py METHOD [busctl-signature args...]"""
import json
import subprocess
import sys


def plain(v):
    if isinstance(v, dict):
        if set(v) == {"type", "data"}:
            return plain(v["data"])
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def main():
    out = subprocess.run(
        ["busctl", "--system", "--json=short", "call", "org.l7fast.Manager1",
         "/org/l7fast/Manager1", "org.l7fast.Manager1", *sys.argv[1:]],
        check=True, capture_output=True, text=True).stdout
    data = plain(json.loads(out))
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    print(json.dumps(data))


if __name__ == "__main__":
    main()
