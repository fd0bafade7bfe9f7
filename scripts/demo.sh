#!/bin/bash
# The demo behind `make demo`: l7fastd on its embedded default policy
# (packaging/policy.toml: listener 127.0.0.1:8080, backends 127.0.0.1:9001
# and :9002), two small HTTP backends, a few requests through every route -
# header and path routes, a canary split, a JWT-protected route with RBAC and
# a header rewrite, ring-hash sticky sessions - then what l7fastctl reports:
# where each route runs and how many requests the kernel handled. Fails when
# a route that should run in the kernel did not.
#
#   scripts/demo.sh                 (as root; after `make build`)
# Environment:
#   BUILD=DIR        build directory (default build)
#   DEMO_KEEP=1      keep everything running afterwards until Ctrl-C, so you
#                    can try `curl http://127.0.0.1:8080/...` and l7fastctl
#   DEMO_REQUESTS=N  requests in the load step (default 2000)
# Uses the system D-Bus if one is running, a private bus otherwise; mounts
# bpffs on /sys/fs/bpf if nothing is mounted there. Everything it starts is
# stopped on exit.

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
L7F_LOG_PREFIX=demo
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
L7FASTD=$BUILD/daemon/l7fastd
L7FASTCTL=$BUILD/daemon/l7fastctl
REQUESTS=${DEMO_REQUESTS:-2000}
URL=http://127.0.0.1:8080

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

[ "$(id -u)" = 0 ] || die "run as root: loading eBPF programs and attaching them to a cgroup needs it"
[ -x "$L7FASTD" ] && [ -x "$L7FASTCTL" ] || die "no l7fastd in $BUILD: run 'make build' first"
for port in 8080 9001 9002; do
	if ss -Hltn "sport = :$port" | grep . >/dev/null; then
		die "port $port is already in use ($(ss -Hltnp "sport = :$port" | awk '{print $NF}' | head -n1)); the default policy needs 8080, 9001 and 9002 free"
	fi
done

WORK=$(mktemp -d /tmp/l7fast-demo.XXXXXX)
PIDS=()
BUS_STARTED=0
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	[ $BUS_STARTED = 1 ] && "$TOP/scripts/dbus/private-bus.sh" stop "$WORK/dbus" >/dev/null 2>&1 || true
	if [ $rc != 0 ] && [ -s "$WORK/l7fastd.log" ]; then
		echo "--- l7fastd log (last 30 lines) ---" >&2
		tail -n 30 "$WORK/l7fastd.log" >&2
	fi
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- environment: bpffs and a bus ------------------------------------------------
if ! mount -t bpf | grep ' /sys/fs/bpf ' >/dev/null; then
	mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs on /sys/fs/bpf"
fi
if [ -z "${DBUS_SYSTEM_BUS_ADDRESS:-}" ] && [ ! -S /run/dbus/system_bus_socket ]; then
	mkdir -p "$WORK/dbus"
	eval "$("$TOP/scripts/dbus/private-bus.sh" start "$WORK/dbus")"
	BUS_STARTED=1
	echo "(no system D-Bus here: using a private one at $DBUS_SYSTEM_BUS_ADDRESS)"
fi

# --- backends and the daemon ------------------------------------------------------
say "Two backends on 127.0.0.1:9001 and :9002 (tests/e2e/backend.py; they echo what they received)"
for b in 1 2; do
	python3 "$TOP/tests/e2e/backend.py" "backend-$b" 900$b >/dev/null 2>&1 &
	PIDS+=($!)
done

say "l7fastd on the embedded default policy (packaging/policy.toml)"
printf '$ %s\n' "$L7FASTD --default-policy"
"$L7FASTD" --default-policy >"$WORK/l7fastd.log" 2>&1 &
PIDS+=($!)
DAEMON_PID=$!
# Loading the data plane (the verifier) takes seconds, many more on a busy
# machine: the daemon gets two minutes to listen and to be on the bus, as
# long as it runs.
for _ in $(seq 1200); do
	curl -s -o /dev/null --max-time 1 "$URL/healthz" 2>/dev/null && break
	kill -0 $DAEMON_PID 2>/dev/null || die "l7fastd exited: $(tail -n 5 "$WORK/l7fastd.log")"
	sleep 0.1
done
for _ in $(seq 1200); do
	"$L7FASTCTL" status >/dev/null 2>&1 && break
	sleep 0.1
done
run "$L7FASTCTL" status

say "Where each route runs"
run "$L7FASTCTL" routes

# --- requests ---------------------------------------------------------------------
backend_of() { sed -n 's/.*"backend": *"\([^"]*\)".*/\1/p'; }
# Tokens of the default policy's "demo" issuer, signed with its public demo
# secret, read from the policy file the daemon embeds (one source of truth).
SECRET=$(sed -n 's/.*secret_base64url = "\([^"]*\)".*/\1/p' "$TOP/packaging/policy.toml" | head -n 1)
[ -n "$SECRET" ] || die "no secret_base64url in packaging/policy.toml"
mint() { # sub [exp-offset-seconds] [secret]: prints an HS256 token
	python3 - "$1" "${2:-600}" "${3:-$SECRET}" <<'EOF'
import base64, hashlib, hmac, json, sys, time
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
secret = base64.urlsafe_b64decode(sys.argv[3] + "=" * (-len(sys.argv[3]) % 4))
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
body = b64(json.dumps({"iss": "l7fast-demo", "sub": sys.argv[1], "exp": int(time.time()) + int(sys.argv[2])}).encode())
sig = b64(hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest())
print(f"{head}.{body}.{sig}")
EOF
}
TOKEN=$(mint alice)
EXPIRED=$(mint alice -120)
FORGED=$(mint alice 600 "$(printf 'not the demo secret' | basenc --base64url | tr -d =)")
say "One request per route (the backend that answered is in the response)"
printf '%-44s %s\n' "request" "status / answered by"
show() { # label curl-args...
	local label=$1 out code
	shift
	out=$(curl -s --max-time 5 -w '\n%{http_code}' "$@") || die "curl $* failed"
	code=${out##*$'\n'}
	printf '%-44s %s %s\n' "$label" "$code" "$(printf '%s' "${out%$'\n'*}" | backend_of)"
}
show "GET /healthz                  (health)" "$URL/healthz"
show "HEAD /healthz                 (health)" -I "$URL/healthz"
show "GET /api/items (90/10 split)  (api)" "$URL/api/items"
show "GET / with X-Canary: 1   (canary-opt-in)" -H 'X-Canary: 1' "$URL/"
show "POST /upload 1 MiB body       (default)" --data-binary @<(head -c 1048576 /dev/zero) "$URL/upload"
show "GET /big (4 MiB response)     (default)" -o /dev/null "$URL/big?size=4194304"
show "malformed: two Content-Lengths" -H 'Content-Length: 1' -H 'Content-Length: 2' -d x "$URL/"
show "GET /private/a, no token      (private)" "$URL/private/a"
show "GET /private/a, forged token  (private)" -H "Authorization: Bearer $FORGED" "$URL/private/a"
show "GET /private/a, expired token (private)" -H "Authorization: Bearer $EXPIRED" "$URL/private/a"
show "GET /private/a, valid token   (private)" -H "Authorization: Bearer $TOKEN" "$URL/private/a"
show "GET /private/b, same token    (private)" -H "Authorization: Bearer $TOKEN" "$URL/private/b"
show "DELETE /private/a, RBAC deny  (private)" -X DELETE -H "Authorization: Bearer $TOKEN" "$URL/private/a"
for user in alice bob carol dave alice bob carol dave; do
	show "GET /session/x, X-User: $user$(printf '%*s' $((6 - ${#user})) '')(session)" -H "X-User: $user" "$URL/session/x"
done
printf '%s\n' "What a 401 says, and what the backend got from the private route:"
curl -s -o /dev/null -D - --max-time 5 "$URL/private/a" | grep -i '^www-authenticate' || true
curl -s --max-time 5 -H "Authorization: Bearer $TOKEN" "$URL/private/echo" | grep -io '"x-l7fast-route": *"[^"]*"' || true

say "$REQUESTS requests on keep-alive connections, spread over the routes"
python3 - "$REQUESTS" "$TOKEN" <<'EOF'
import http.client, collections, sys, time
n, token = int(sys.argv[1]), sys.argv[2]
paths = ["/healthz", "/api/a", "/api/b", "/", "/page", "/private/p", "/session/s"]
seen = collections.Counter()
conns = [http.client.HTTPConnection("127.0.0.1", 8080, timeout=5) for _ in range(4)]
t0 = time.monotonic()
for i in range(n):
    c = conns[i % len(conns)]
    path = paths[i % len(paths)]
    headers = {"X-Canary": "1"} if i % 10 == 0 else {}
    if path.startswith("/private/"):
        headers["Authorization"] = "Bearer " + token
    elif path.startswith("/session/"):
        headers["X-User"] = f"user-{i % 50}"
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    body = r.read()
    seen[(r.status, body.split(b'"backend": "', 1)[1].split(b'"', 1)[0].decode() if b'"backend"' in body else "-")] += 1
dt = time.monotonic() - t0
print(f"{n} requests in {dt:.2f} s from one Python client; status/backend counts:")
for (status, backend), count in sorted(seen.items()):
    print(f"  {status} {backend:10s} {count}")
EOF

say "What the kernel handled (requests_kernel) and what took the user-space path"
run "$L7FASTCTL" stats

say "Summary"
"$L7FASTCTL" --json status >"$WORK/status.json"
"$L7FASTCTL" --json stats >"$WORK/stats.json"
python3 - "$WORK/status.json" "$WORK/stats.json" <<'EOF'
import json, sys
status, stats = (json.load(open(f)) for f in sys.argv[1:3])
routes = stats["routes"]
kernel = sum(r["requests_kernel"] for r in routes)
total = kernel + sum(r["requests_user"] for r in routes)
placed = [r["name"] for r in routes if r["placement"] == "kernel"]
print(f"{len(placed)} of {len(routes)} routes in the kernel; {kernel:,} of {total:,} requests "
      f"on the kernel path ({100.0 * kernel / max(total, 1):.1f}%)")
for w in status.get("warnings", []):
    print("warning (expected with the default policy):", w)
if status["state"] != "running":
    print(f"the kernel data plane is not running here ({status.get('degraded_reason')}): "
          "every request took the user-space path")
    sys.exit(0)
missing = [r["name"] for r in routes if r["placement"] != "kernel" or r["requests_kernel"] == 0]
if missing:
    sys.exit(f"demo: routes that should have run in the kernel did not: {', '.join(missing)}")
EOF

if [ "${DEMO_KEEP:-0}" = 1 ]; then
	say "Running; try: curl -v $URL/api/x   and   $L7FASTCTL stats   (Ctrl-C stops everything)"
	[ $BUS_STARTED = 1 ] && echo "(for l7fastctl in another shell: export DBUS_SYSTEM_BUS_ADDRESS=$DBUS_SYSTEM_BUS_ADDRESS)"
	wait $DAEMON_PID
else
	say "Done; 'make demo DEMO_KEEP=1' keeps it running to try it yourself"
fi
