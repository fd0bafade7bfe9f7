"""The benchmark's policies as l7fast policy TOML (docs/policy.md).

Every feature is expressed; where each route runs (kernel or slow path)
is l7fastd's placement decision, and the harness reports the share of
requests the kernel took ("kernel share" column). No pool size is set: the
default pool_max (1024 per endpoint) covers the concurrency sweep's 512
connections.
"""
import base64

from ..scenarios import HOST, JWT_ISSUER, JWT_SECRET, TENANT, route_prefix

NOT_AVAILABLE = {}


def render(policy, ctx):
    out = [ctx.daemon_header,
           "[[listener]]", 'name = "web"', f'address = "127.0.0.1:{ctx.listen_port}"', ""]
    eps = ctx.endpoints[:4] if policy.hash_lb else ctx.endpoints[:1]
    out += ["[[cluster]]", 'name = "be"',
            "endpoints = [ " + ", ".join(f'{{ address = "{h}:{p}" }}' for h, p in eps) + " ]"]
    if policy.hash_lb:
        out += ['lb = "ring_hash"', 'hash_key = { header = "x-user" }']
    out.append("")
    if policy.jwt_bytes:
        secret = base64.urlsafe_b64encode(JWT_SECRET.encode()).rstrip(b"=").decode()
        out += ["[[jwt_provider]]", 'name = "bench"', f'issuer = "{JWT_ISSUER}"', 'algorithms = ["HS256"]',
                f'keys = [ {{ alg = "HS256", secret_base64url = "{secret}" }} ]', ""]
    for i in range(policy.routes):
        out += ["[[route]]", f'name = "r{i:04d}"', 'cluster = "be"']
        if policy.jwt_bytes:
            out.append('jwt = "bench"')
        if policy.header_add:
            out.append('request_headers = { add = [ { name = "X-Bench-Added", value = "1" } ] }')
        out += ["[route.match]", f'path_prefix = "{route_prefix(i)}"']
        if policy.match == "full":
            out += ['method = ["GET"]', f'host = "{HOST}"',
                    f'headers = [ {{ name = "x-tenant", exact = "{TENANT}" }} ]']
        if policy.rbac_rules:
            rules = ",\n".join(f'  {{ action = "deny", headers = [ {{ name = "x-user", exact = "blocked-{k}" }} ] }}'
                               for k in range(policy.rbac_rules))
            out += ["[route.rbac]", 'mode = "first_match"', 'default = "allow"', "rules = [", rules, "]"]
        out.append("")
    return "\n".join(out)
