#!/usr/bin/env python3
"""JWT and ring-hash checks of the system test (policies/jwt-ringhash.toml):
prints one JSON object with what it saw.
    jwtring.py HOST:PORT
Key rotation (the secret replaced by ROTATED through a reload):
    jwtring.py HOST:PORT rotate-load STOPFILE OUT   old-key requests until
        STOPFILE exists (at most 3000): [start, end, status] each, into OUT
    jwtring.py HOST:PORT rotated                    {"old": status, "new": status}
Figures, not checks:
    jwtring.py HOST:PORT flood valid|forged TOTAL CONNS
    jwtring.py HOST:PORT first-sight N   N requests on one connection, each
        with a valid token seen for the first time: statuses, latencies"""
import base64
import hashlib
import hmac
import http.client
import json
import socket
import sys
import time

SECRET = b"l7fast-system-test-hs256-secret-0123456789"
ROTATED = b"l7fast-system-test-hs256-rotated-9876543210"
ISSUER = "https://issuer.systest"


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def token(claims, secret=SECRET, header=None):
    header = header or {"alg": "HS256", "typ": "JWT"}
    inp = b64u(json.dumps(header).encode()) + "." + b64u(json.dumps(claims).encode())
    if header.get("alg") == "none":
        return inp + "."
    return inp + "." + b64u(hmac.new(secret, inp.encode(), hashlib.sha256).digest())


def raw_get(host, port, path, headers):
    """One keep-alive GET on its own connection: the response's bytes as
    sent (a request that asks to close is the slow path's to answer)."""
    s = socket.create_connection((host, port), timeout=5)
    try:
        req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
        req += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        s.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                return buf
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body
    finally:
        s.close()


def rotate_load(host, port, stopfile, outfile):
    import os
    tok = token({"iss": ISSUER, "sub": "old", "exp": int(time.time()) + 600})
    seen = []
    conn = None
    for _ in range(3000):
        if os.path.exists(stopfile):
            break
        t0 = time.time()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("GET", "/api/rot", headers={"Authorization": "Bearer " + tok})
            r = conn.getresponse()
            r.read()
            st = r.status
        except (OSError, http.client.HTTPException) as e:
            conn = None
            st = "error " + type(e).__name__
        seen.append([t0, time.time(), st])
    with open(outfile, "w") as f:
        json.dump(seen, f)


def rotated(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=5)
    out = {}
    for name, secret in (("old", SECRET), ("new", ROTATED)):
        conn.request("GET", "/api/rot", headers={"Authorization": "Bearer " + token(
            {"iss": ISSUER, "sub": name, "exp": int(time.time()) + 600}, secret)})
        r = conn.getresponse()
        r.read()
        out[name] = r.status
    print(json.dumps(out))


def flood(host, port, kind, total, conns):
    """total requests over conns keep-alive connections, every one with the
    same valid or forged token: {"statuses": {...}, "seconds": s}."""
    import threading
    now = int(time.time())
    tok = token({"iss": ISSUER, "sub": "flood", "exp": now + 600},
                SECRET if kind == "valid" else b"f" * 42)
    statuses = {}
    lock = threading.Lock()

    def worker(n):
        c = http.client.HTTPConnection(host, port, timeout=10)
        mine = {}
        for _ in range(n):
            try:
                c.request("GET", "/api/flood", headers={"Authorization": "Bearer " + tok})
                r = c.getresponse()
                r.read()
                mine[r.status] = mine.get(r.status, 0) + 1
            except (OSError, http.client.HTTPException):
                mine["error"] = mine.get("error", 0) + 1
                c = http.client.HTTPConnection(host, port, timeout=10)
        with lock:
            for k, v in mine.items():
                statuses[str(k)] = statuses.get(str(k), 0) + v

    t0 = time.time()
    threads = [threading.Thread(target=worker, args=(total // conns,)) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"statuses": statuses, "seconds": round(time.time() - t0, 2)}))


def first_sight(host, port, n):
    """n sequential requests on one keep-alive connection, each with a new
    valid token (the tokens are made before the clock starts):
    {"statuses": {...}, "p50_us": .., "p90_us": .., "mean_us": ..}."""
    now = int(time.time())
    toks = [token({"iss": ISSUER, "sub": f"first-{now}-{i}", "exp": now + 600}) for i in range(n)]
    c = http.client.HTTPConnection(host, port, timeout=10)
    statuses, lat = {}, []
    for tok in toks:
        t0 = time.perf_counter()
        c.request("GET", "/api/first", headers={"Authorization": "Bearer " + tok})
        r = c.getresponse()
        r.read()
        lat.append((time.perf_counter() - t0) * 1e6)
        statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
    lat.sort()
    print(json.dumps({"statuses": statuses, "p50_us": round(lat[len(lat) // 2]),
                      "p90_us": round(lat[len(lat) * 9 // 10]), "mean_us": round(sum(lat) / len(lat))}))


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    if len(sys.argv) > 2 and sys.argv[2] == "flood":
        return flood(host, int(port), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    if len(sys.argv) > 2 and sys.argv[2] == "first-sight":
        return first_sight(host, int(port), int(sys.argv[3]))
    if len(sys.argv) > 2 and sys.argv[2] == "rotate-load":
        return rotate_load(host, int(port), sys.argv[3], sys.argv[4])
    if len(sys.argv) > 2 and sys.argv[2] == "rotated":
        return rotated(host, int(port))
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
    # decided in the kernel where l7fast.ko verifies (the claims, the
    # parts' form, alg none and RS256, a kid without keys), or by the slow
    # path (a header outside the kernel scan's subset: an escape); a 401 is
    # the same bytes whoever sends it
    now = int(time.time())
    bad = {
        "expired": token({"iss": ISSUER, "exp": now - 3600}),
        "not_yet_valid": token({"iss": ISSUER, "exp": now + 600, "nbf": now + 3600}),
        "wrong_issuer": token({"iss": "https://other.systest", "exp": now + 600}),
        "alg_none": token({"iss": ISSUER, "exp": now + 600}, header={"alg": "none", "typ": "JWT"}),
        # HS/RS confusion: RS256 named, signed with the HMAC secret
        "rs_confusion": token({"iss": ISSUER, "exp": now + 600}, header={"alg": "RS256", "typ": "JWT"}),
        "unknown_kid": token({"iss": ISSUER, "exp": now + 600}, header={"alg": "HS256", "kid": "nope", "typ": "JWT"}),
        # json.dumps writes the kid as "n\u00e9": an escape, the slow path's
        "escaped_kid": token({"iss": ISSUER, "exp": now + 600}, header={"alg": "HS256", "kid": "n\u00e9", "typ": "JWT"}),
    }
    good_now = token({"iss": ISSUER, "sub": "shapes", "exp": now + 600})
    h, p, sig = good_now.split(".")
    bad.update({
        "truncated_signature": f"{h}.{p}.{sig[:-3]}",  # 30 canonical bytes: the wrong length
        "padded_signature": good_now + "=",
        "bad_base64url_payload": f"{h}.*{p[1:]}.{sig}",
        "two_parts": f"{h}.{p}",
        "four_parts": good_now + ".x",
    })
    answers = {}
    for name, tok in bad.items():
        answers[name] = raw_get(host, int(port), "/api/v1/items", {"Authorization": "Bearer " + tok})
        out[name] = answers[name].split(b" ", 2)[1].decode() if answers[name] else "no answer"
    answers["forged"] = raw_get(host, int(port), "/api/v1/items", {"Authorization": "Bearer " + forged})
    out["same_401_bytes"] = len(set(answers.values())) == 1
    out["answer_401"] = answers["forged"].decode(errors="replace")
    # a valid token whose header has a member the daemon's installed forms
    # lack (the kernel scans it)
    odd = token({"iss": ISSUER, "exp": now + 600}, header={"alg": "HS256", "typ": "JWT", "cty": "x"})
    out["odd_header"] = get("/api/v1/items", {"Authorization": "Bearer " + odd})[0]
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
