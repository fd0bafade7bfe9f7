#!/usr/bin/env python3
"""The data plane's pooled upstream connections as its pinned maps show them
(l7_slot_by_tuple: the slots registered toward each peer; l7_slot_state:
their states), read with bpftool. A kernel request that finds no idle
pooled connection goes to the slow path (pool_miss), and l7fastd opens them
asynchronously (after it starts or reloads, or to replace one that closed):
tests that count what the kernel took wait for idle ones first. Used by the
end-to-end tests (tests/e2e/l7env.py) and, as a command, by the system
test's guest:

    l7fast_pools.py wait MAPS_DIR N ADDRESS...
        exits 0 once every ADDRESS ("ip:port") has N idle pooled
        connections, 1 after 60 s (printing what there is)
"""
import ipaddress
import json
import os
import subprocess
import sys
import time

from l7fast_abi import SLOT_STATES

WAIT_SECONDS = 60


def _dump(path):
    out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", path],
                         capture_output=True, text=True, check=True).stdout
    return [e.get("formatted", e) for e in json.loads(out)]


def pool_states(maps, address):
    """The pooled connections to `address` ("ip:port", "[ip6]:port") by
    state name ({"IDLE": 2, ...}); empty without a data plane."""
    if not os.path.exists(f"{maps}/l7_slot_by_tuple"):
        return {}
    host, _, port = address.rpartition(":")
    packed = ipaddress.ip_address(host.strip("[]")).packed.ljust(16, b"\0")
    peer = [int.from_bytes(packed[i:i + 4], "little") for i in range(0, 16, 4)]
    ids = [e["value"] for e in _dump(f"{maps}/l7_slot_by_tuple")
           if e["key"]["server_port"] == int(port) and e["key"]["server_ip"] == peer]
    if not ids:
        return {}
    cmds = "".join(f"map lookup pinned {maps}/l7_slot_state key {' '.join(map(str, i.to_bytes(4, 'little')))}\n"
                   for i in ids)
    out = subprocess.run(["bpftool", "-j", "batch", "file", "-"], input=cmds, capture_output=True,
                         text=True, check=True).stdout
    by_name = {}
    for r in json.loads(out):
        v = r["output"].get("formatted", {}).get("value")
        name = SLOT_STATES.get(v, str(v))
        by_name[name] = by_name.get(name, 0) + 1
    return by_name


def idle(maps, address):
    return pool_states(maps, address).get("IDLE", 0)


def main(argv):
    if len(argv) < 4 or argv[0] != "wait":
        sys.exit(__doc__)
    maps, n, addresses = argv[1], int(argv[2]), argv[3:]
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        have = {a: idle(maps, a) for a in addresses}
        if all(v >= n for v in have.values()):
            return 0
        if time.monotonic() > deadline:
            print(f"fewer than {n} idle pooled connections after {WAIT_SECONDS} s: {have}", file=sys.stderr)
            return 1
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
