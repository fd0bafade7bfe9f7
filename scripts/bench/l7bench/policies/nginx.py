"""The benchmark's policies as nginx configuration (proxy_pass with upstream
keepalive), and the backend every system uses (nginx `return 200`).

nginx idioms: routes are prefix locations (nginx keeps them in a tree, not
a list), the method/host/header conditions are server_name, limit_except and
an `if` on the header, RBAC deny rules are a `map` of the denied x-user
values, the hash is `hash $http_x_user consistent`. Open-source nginx has no
JWT verification.
"""
from ..scenarios import HOST, TENANT, route_prefix

NOT_AVAILABLE = {
    "jwt": "n/a (open-source nginx has no JWT verification)",
}


def _common(ctx, name):
    w = ctx.workdir
    return f"""daemon off;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {w}/{name}.pid;
error_log {w}/{name}.error.log warn;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    client_body_temp_path {w}/tmp-body;
    proxy_temp_path {w}/tmp-proxy;
    fastcgi_temp_path {w}/tmp-fastcgi;
    uwsgi_temp_path {w}/tmp-uwsgi;
    scgi_temp_path {w}/tmp-scgi;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    large_client_header_buffers 4 32k;
"""


def render(policy, ctx):
    eps = ctx.endpoints[:4] if policy.hash_lb else ctx.endpoints[:1]
    out = _common(ctx, "proxy").splitlines()
    if policy.rbac_rules:
        out.append("    map $http_x_user $bench_denied {")
        out.append("        default 0;")
        out += [f'        "blocked-{i}" 1;' for i in range(policy.rbac_rules)]
        out.append("    }")
    out.append("    upstream be {")
    if policy.hash_lb:
        out.append("        hash $http_x_user consistent;")
    out += [f"        server {h}:{p};" for h, p in eps]
    # idle upstream connections kept: above the concurrency sweep's 512
    # client connections, or nginx closes and reopens the ones beyond
    out += ["        keepalive 1024;", "        keepalive_requests 10000000;", "    }",
            "    proxy_http_version 1.1;",
            '    proxy_set_header Connection "";',
            "    proxy_set_header Host $http_host;"]
    if policy.header_add:
        out.append("    proxy_set_header X-Bench-Added 1;")
    out += ["    server {", f"        listen 127.0.0.1:{ctx.listen_port};"]
    if policy.match == "full":
        out.append(f"        server_name {HOST};")
    if policy.rbac_rules:
        out.append("        if ($bench_denied) { return 403; }")
    for i in range(policy.routes):
        out.append(f"        location {route_prefix(i)} {{")
        if policy.match == "full":
            out.append("            limit_except GET { deny all; }")
            out.append(f'            if ($http_x_tenant != "{TENANT}") {{ return 404; }}')
        out += ["            proxy_pass http://be;", "        }"]
    out += ["        location / { return 404; }", "    }", "}"]
    return "\n".join(out) + "\n"


def render_backend(ports, ctx):
    """The fixed fast HTTP/1.1 backend: 200 with a 3-byte body on every port."""
    out = _common(ctx, "backend").splitlines()
    out += ["    server {"]
    out += [f"        listen 127.0.0.1:{p} backlog=4096;" for p in ports]
    out += ["        location / { return 200 \"ok\\n\"; }", "    }", "}"]
    return "\n".join(out) + "\n"
