"""One template module per system: how each system expresses the benchmark's
policies (scenarios.Policy). A module has

  NOT_AVAILABLE  {feature: reason} for features it cannot express (yet)
  render(policy, ctx) -> str   the system's configuration text

Supporting a new feature in a system means writing it in render() and
removing it from NOT_AVAILABLE; the harness needs no change.
"""
from dataclasses import dataclass
from pathlib import Path

from . import haproxy, l7fast, nginx  # noqa: F401


FEATURE_NAMES = {"routing": "path routing", "match_full": "method/host/header match",
                 "header_add": "header add", "rbac": "RBAC", "jwt": "JWT HS256",
                 "hash_lb": "consistent hash"}


@dataclass
class Ctx:
    listen_port: int
    endpoints: list           # [(host, port)], at least 4 (hash_lb uses 4)
    workdir: Path
    daemon_header: str = ""   # l7fast: the [daemon] table


def unavailable(module, policy):
    """The reason `module` cannot run `policy`, or None."""
    missing = [f for f in policy.features() if f in module.NOT_AVAILABLE]
    if not missing:
        return None
    by_reason = {}
    for f in missing:
        by_reason.setdefault(module.NOT_AVAILABLE[f], []).append(FEATURE_NAMES.get(f, f))
    return "; ".join(f"{why}: {', '.join(fs)}" for why, fs in by_reason.items())
