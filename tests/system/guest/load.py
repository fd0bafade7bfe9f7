#!/usr/bin/env python3
"""Load for the system test: THREADS clients send GET PATH to HOST:PORT until
STOPFILE exists (or SECONDS pass), half over one keep-alive connection each,
half with a new connection per request. Every request must get a 200 from a
known backend; anything else (refused, reset, timeout, other status) is a
failure. Prints one JSON summary line. PROGRESSFILE, if given, holds the
number of requests answered so far (rewritten every 20), for the test to
wait for progress instead of waiting a while.
    load.py HOST:PORT PATH THREADS SECONDS STOPFILE [PROGRESSFILE]"""
import http.client
import json
import os
import sys
import threading
import time

KNOWN = ("alpha", "beta", "gamma")


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    path, threads, seconds, stopfile = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    progress = sys.argv[6] if len(sys.argv) > 6 else None
    lock = threading.Lock()
    res = {"ok": 0, "failed": 0, "backends": {}, "errors": [], "reconnects": 0}
    deadline = time.monotonic() + seconds

    def record(ok, what):
        with lock:
            if ok:
                res["ok"] += 1
                res["backends"][what] = res["backends"].get(what, 0) + 1
                if progress and res["ok"] % 20 == 0:
                    with open(progress + ".new", "w") as f:
                        f.write(f"{res['ok']}\n")
                    os.replace(progress + ".new", progress)
            else:
                res["failed"] += 1
                if len(res["errors"]) < 10:
                    res["errors"].append(what)

    def client(keepalive):
        conn = None
        while time.monotonic() < deadline and not os.path.exists(stopfile):
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, int(port), timeout=10)
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read().decode(errors="replace")
                who = body.split(" ", 1)[0]
                if r.status == 200 and who in KNOWN:
                    record(True, who)
                else:
                    record(False, f"status {r.status}: {body[:80]!r}")
                if not keepalive or r.will_close:
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - every failure counts
                record(False, f"{type(e).__name__}: {e}")
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()

    ts = [threading.Thread(target=client, args=(i % 2 == 0,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
