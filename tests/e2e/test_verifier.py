"""What the data plane costs the kernel's verifier. Every start logs each
program's instructions processed against the 1M limit, and warns when one
is past 3/4 of it: the margin a kernel update can eat (6.18.44's verifier
pruned the header-name loop less, and l7_req_msg went from ~77k to over
1M instructions until bpf/lib/match.h verified that loop once, as a global
function; ARCHITECTURE §7)."""
import json
import re

from l7env import catch_all_toml, free_port

# the socket programs, and the slow path's take from a keyed rate limit's table
PROGRAMS = {"l7_sockops", "l7_req_msg", "l7_resp_msg", "l7_req_skb", "l7_resp_skb", "l7_remote_out_msg",
            "l7_rate_take_user"}


def test_each_programs_verifier_cost_is_logged_with_room_to_spare(env):
    backend = env.backend("a")
    d = env.start(catch_all_toml(free_port(), backend.address()))
    log = d.log()
    m = re.search(r"data plane verified \(instructions processed, limit 1000000 each\): (.*)", log)
    assert m, log[-3000:]
    costs = {name: int(n) for name, n in (e.rsplit(" ", 1) for e in m.group(1).split(", "))}
    print(f"[verifier] {costs}")
    assert set(costs) == PROGRAMS, costs
    assert all(n > 0 for n in costs.values()), costs
    assert "may reject the data plane" not in log, log[-3000:]
    rc, out, err = env.ctl("--json", "status")
    assert rc == 0, err
    assert json.loads(out)["state"] == "running", out
