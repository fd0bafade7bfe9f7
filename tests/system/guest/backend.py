#!/usr/bin/env python3
"""A backend for the system test: HTTP/1.1 with keep-alive, answers every
request with "<name> <method> <path>" so the client sees who served it.
    backend.py NAME PORT"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # head and body are separate writes: without TCP_NODELAY, Nagle holds
    # the body until the peer's delayed ACK (~40 ms per response)
    disable_nagle_algorithm = True

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = f"{self.server.name} {self.command} {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Backend", self.server.name)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, fmt, *args):
        pass


class Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 drops SYNs when a proxy opens its
    # pooled connections while clients arrive (as tests/e2e/backend.py)
    request_queue_size = 128


def main():
    name, port = sys.argv[1], int(sys.argv[2])
    srv = Server(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    srv.name = name
    srv.serve_forever()


if __name__ == "__main__":
    main()
