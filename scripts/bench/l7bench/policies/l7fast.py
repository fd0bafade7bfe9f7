"""The benchmark's policies as l7fast policy TOML (docs/policy.md)."""
from ..scenarios import HOST, TENANT, route_prefix

NOT_AVAILABLE = {
    "header_add": "n/a (not yet implemented)",
    "rbac": "n/a (not yet implemented)",
    "jwt": "n/a (not yet implemented)",
    "hash_lb": "n/a (not yet implemented)",
}


def render(policy, ctx):
    out = [ctx.daemon_header,
           "[[listener]]", 'name = "web"', f'address = "127.0.0.1:{ctx.listen_port}"', ""]
    eps = ctx.endpoints[:4] if policy.hash_lb else ctx.endpoints[:1]
    out += ["[[cluster]]", 'name = "be"',
            "endpoints = [ " + ", ".join(f'{{ address = "{h}:{p}" }}' for h, p in eps) + " ]", ""]
    for i in range(policy.routes):
        out += ["[[route]]", f'name = "r{i:04d}"', 'cluster = "be"', "[route.match]",
                f'path_prefix = "{route_prefix(i)}"']
        if policy.match == "full":
            out += ['method = ["GET"]', f'host = "{HOST}"',
                    f'headers = [ {{ name = "x-tenant", exact = "{TENANT}" }} ]']
        out.append("")
    return "\n".join(out)
