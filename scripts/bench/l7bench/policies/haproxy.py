"""The benchmark's policies as HAProxy 2.6 configuration.

One thread (pinned by the harness), keep-alive on both sides with
`http-reuse always`; maxconn 4096 (global and per frontend, with server
maxconn 1000: the concurrency sweep goes to 512 client connections, each
holding one upstream connection); tune.bufsize 32 KiB so that 16 KiB request heads fit
(the default 16 KiB buffer would answer 400). Routes are use_backend rules
tried in order, RBAC rules are `http-request deny` rules, JWT is
jwt_verify (HS256) plus checks of alg and iss, the hash is
`balance hdr(x-user)` with `hash-type consistent`.
"""
from ..scenarios import HOST, JWT_ISSUER, JWT_SECRET, TENANT, route_prefix

NOT_AVAILABLE = {}


def render(policy, ctx):
    eps = ctx.endpoints[:4] if policy.hash_lb else ctx.endpoints[:1]
    out = f"""global
    nbthread 1
    maxconn 4096
    tune.bufsize 32768
    tune.maxrewrite 1024

defaults
    mode http
    maxconn 4096
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    timeout http-request 60s
    http-reuse always
    option http-keep-alive

frontend web
    bind 127.0.0.1:{ctx.listen_port}
""".splitlines()
    if policy.jwt_bytes:
        out += [
            "    http-request set-var(txn.bearer) http_auth_bearer",
            "    http-request set-var(txn.jwt_alg) var(txn.bearer),jwt_header_query('$.alg')",
            "    http-request deny deny_status 401 unless { var(txn.jwt_alg) -m str HS256 }",
            f'    http-request deny deny_status 401 unless {{ var(txn.bearer),'
            f'jwt_verify(txn.jwt_alg,"{JWT_SECRET}") -m int 1 }}',
            f"    http-request deny deny_status 401 unless {{ var(txn.bearer),"
            f"jwt_payload_query('$.iss') -m str {JWT_ISSUER} }}",
        ]
    for i in range(policy.rbac_rules):
        out.append(f"    http-request deny deny_status 403 if {{ req.hdr(x-user) -m str blocked-{i} }}")
    if policy.header_add:
        out.append("    http-request set-header X-Bench-Added 1")
    for i in range(policy.routes):
        cond = f"{{ path_beg {route_prefix(i)} }}"
        if policy.match == "full":
            cond = (f"METH_GET {{ req.hdr(host) -i {HOST} }} {cond} "
                    f"{{ req.hdr(x-tenant) -m str {TENANT} }}")
        out.append(f"    use_backend be if {cond}")
    out += ["", "backend be"]
    if policy.hash_lb:
        out += ["    balance hdr(x-user)", "    hash-type consistent"]
    for n, (h, p) in enumerate(eps):
        out.append(f"    server s{n} {h}:{p} maxconn 1000")
    return "\n".join(out) + "\n"
