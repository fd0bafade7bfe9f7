#!/usr/bin/env python3
"""JWT and ring-hash checks of the system test (policies/jwt-ringhash.toml):
prints one JSON object with what it saw.
    jwtring.py HOST:PORT"""
import base64
import hashlib
import hmac
import http.client
import json
import sys
import time

SECRET = b"l7fast-system-test-hs256-secret-0123456789"
ISSUER = "https://issuer.systest"


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def token(claims, secret=SECRET):
    inp = b64u(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64u(json.dumps(claims).encode())
    return inp + "." + b64u(hmac.new(secret, inp.encode(), hashlib.sha256).digest())


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)

    def get(path, headers=None):
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        body = r.read()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body

    good = token({"iss": ISSUER, "sub": "alice", "exp": int(time.time()) + 600})
    forged = token({"iss": ISSUER, "sub": "alice", "exp": int(time.time()) + 600}, b"x" * 42)
    out = {}
    statuses = [get("/api/v1/items", {"Authorization": "Bearer " + good})[0] for _ in range(50)]
    out["valid"] = sorted(set(statuses))
    st, hdr, _ = get("/api/v1/items", {"Authorization": "Bearer " + forged})
    out["forged"] = st
    out["forged_www_authenticate"] = hdr.get("www-authenticate", "")
    st, hdr, _ = get("/api/v1/items")
    out["missing"] = st
    out["missing_www_authenticate"] = hdr.get("www-authenticate", "")
    # ring hash: each user sticks to one backend; users spread over all three
    placement = {}
    sticky = True
    for u in range(30):
        seen = set()
        for _ in range(4):
            st, hdr, _ = get("/shard/x", {"X-User": f"user-{u}"})
            seen.add(hdr.get("x-backend") if st == 200 else f"status {st}")
        sticky &= len(seen) == 1
        placement[f"user-{u}"] = sorted(seen)[0]
    out["sticky"] = sticky
    out["backends"] = sorted(set(placement.values()))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
