#!/usr/bin/env python3
"""A small HTTP/1.1 backend for l7fast's end-to-end tests and demo.

Answers every request with a JSON description of what it received (backend
name, method, path, headers, body length and checksum), which is how tests
see where a request went and whether its bytes arrived intact. Query
parameters shape the response:

  status=N      status code (204 and 304 are sent without a body)
  size=N        body of N bytes instead of the JSON
  chunked=1     chunked transfer coding for the body
  delay=MS      wait before answering
  close=1       "Connection: close" and close after the response
  http10=1      answer as HTTP/1.0 without Content-Length (body until close)
  interim=1     send "100 Continue" style interim response first (103 Early Hints)
  linger=MS     wait after the response before the connection goes on (or
                closes, for a request with Connection: close)

Usage: backend.py NAME PORT [HOST]
"""
import hashlib
import json
import socketserver
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # head and body are separate writes: without TCP_NODELAY, Nagle holds
    # the body until the peer's delayed ACK (~40 ms per response)
    disable_nagle_algorithm = True
    server_version = "l7fast-test-backend"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if te.lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0") or "0")
        return self.rfile.read(n) if n else b""

    def _respond(self):
        body = self._body()
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if "delay" in q:
            time.sleep(int(q["delay"]) / 1000.0)
        status = int(q.get("status", "200"))
        if "size" in q:
            payload = b"x" * int(q["size"])
            ctype = "application/octet-stream"
        else:
            payload = json.dumps({
                "backend": self.server.name,
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body_len": len(body),
                "body_sha256": hashlib.sha256(body).hexdigest(),
            }).encode() + b"\n"
            ctype = "application/json"
        if q.get("interim") == "1":
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        if q.get("http10") == "1":
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: " + ctype.encode() + b"\r\n\r\n")
            if self.command != "HEAD":
                self.wfile.write(payload)
            self.wfile.flush()
            self.close_connection = True
            return
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("X-Backend", self.server.name)
        close = q.get("close") == "1"
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        no_body = status in (204, 304) or 100 <= status < 200
        if no_body:
            self.end_headers()
            return
        if q.get("chunked") == "1":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if self.command != "HEAD":
                step = max(1, len(payload) // 3)
                for i in range(0, len(payload), step):
                    part = payload[i:i + step]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _handle(self):
        self._respond()
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if "linger" in q:
            self.wfile.flush()
            time.sleep(int(q["linger"][0]) / 1000)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _handle


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True
    # socketserver's default backlog of 5 drops SYNs when a proxy opens many
    # connections at once (pool exhaustion tests): connects then time out
    request_queue_size = 128


def main():
    name, port = sys.argv[1], int(sys.argv[2])
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    srv = Server((host, port), Handler)
    srv.name = name
    print(f"backend {name} listening on {host}:{port}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
