"""One l7fastd per pin directory. An operator who starts the binary by hand
while the service runs (same daemon.bpffs) must get a clear refusal, and
the running daemon must keep its pins: they are what a restart without
dropped connections adopts (dataplane/BpffsLock.hpp)."""
import os
import subprocess

from l7env import L7FASTD, Conn, free_port


POLICY = """
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "a"
endpoints = [ {{ address = "{backend}" }} ]
[[route]]
name = "all"
cluster = "a"
"""


def pins(bpffs):
    return sorted(os.path.relpath(os.path.join(d, f), bpffs)
                  for d, _, files in os.walk(bpffs) for f in files)


def test_a_second_daemon_on_the_same_pins_refuses_to_start(env):
    backend = env.backend("a")
    port = free_port()
    first = env.start(POLICY.format(port=port, backend=backend.address()))
    before = pins(first.bpffs)
    assert "links/sockops" in before and "maps/l7_config" in before, before

    # the same cgroup and pin directory, another listener
    second_dir = os.path.join(env.tmp.name, "second")
    os.makedirs(second_dir)
    policy = os.path.join(second_dir, "policy.toml")
    with open(policy, "w") as f:
        f.write(f'[daemon]\ncgroup = "{env.cgroup.path}"\nbpffs = "{first.bpffs}"\n'
                + POLICY.format(port=free_port(), backend=backend.address()))
    r = subprocess.run([str(L7FASTD), "--config", policy, "--policy-dir", os.path.join(second_dir, "d")],
                       capture_output=True, text=True, timeout=120, env=env.bus.env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    out = r.stdout + r.stderr
    assert f"another l7fastd (pid {first.proc.pid}) uses the data plane pinned under {first.bpffs}" in out, out[-2000:]

    # the first one kept its pins and still serves from the kernel
    assert pins(first.bpffs) == before
    k0 = env.stats()["routes"]["all"]["requests_kernel"]
    with env.local():
        c = Conn(port)
    for i in range(3):
        c.request("GET", f"/still/{i}")
        assert c.read_response().status == 200
    c.close()
    assert env.stats()["routes"]["all"]["requests_kernel"] > k0
