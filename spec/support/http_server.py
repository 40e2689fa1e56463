#!/usr/bin/env python3
"""A real HTTP/1.1 server for the HTTP client's specs (spec/02-integration/http_spec.lua).

    http_server.py unix:/path/to.sock
    http_server.py tls:PORTFILE CERT KEY CA   (TLS on 127.0.0.1, a free port written to
                                                PORTFILE; clients must show a certificate
                                                signed by CA)

Routes: GET /hello, POST|PUT|DELETE /echo, GET /stream?key=K (one chunk, then the next once
/release?key=K has been called, or "timeout" after 5 s), GET /wait?key=K (answers once
/release?key=K has been called), GET /release?key=K, GET /big?n=BYTES, GET /slow (5 s), GET /tar (an archive as an
engine's GET .../archive sends one).
"""
import http.server
import io
import os
import socketserver
import ssl
import sys
import tarfile
import threading
import time
import urllib.parse

events = {}
events_lock = threading.Lock()


def event(query):
    """The event named by ?key= (each spec uses its own)."""
    key = query.get("key", [""])[0]
    with events_lock:
        return events.setdefault(key, threading.Event())


def engine_archive():
    """What `GET /containers/ID/archive?path=/sandbox/out` answers: the directory's own name
    first, then what lies beneath it; a symlink that leads out of it among them."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        d = tarfile.TarInfo("out")
        d.type = tarfile.DIRTYPE
        d.mode = 0o755
        t.addfile(d)
        for name, data in (("out/a.txt", b"alpha\n"), ("out/sub/b.bin", bytes(range(256)))):
            f = tarfile.TarInfo(name)
            f.size = len(data)
            t.addfile(f, io.BytesIO(data))
        link = tarfile.TarInfo("out/passwd")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        t.addfile(link)
    return buf.getvalue()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="text/plain", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/hello":
            self.reply(200, b"hello", extra=(("X-Multi", "one"), ("X-Multi", "two")))
        elif url.path == "/release":
            event(query).set()
            self.reply(200, b"released")
        elif url.path == "/wait":
            self.reply(200, b"released" if event(query).wait(5) else b"timeout")
        elif url.path == "/stream":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(b"first|")
            self.chunk(b"released" if event(query).wait(5) else b"timeout")
            self.wfile.write(b"0\r\n\r\n")
        elif url.path == "/big":
            self.reply(200, b"x" * int(query.get("n", ["1048576"])[0]))
        elif url.path == "/slow":
            time.sleep(5)
            self.reply(200, b"late")
        elif url.path == "/tar":
            self.reply(200, engine_archive(), ctype="application/x-tar")
        else:
            self.reply(404, b'{"message":"no such route"}', ctype="application/json")

    def echo(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        ctype = self.headers.get("Content-Type") or "-"
        self.reply(200, b"%s %s %s|" % (self.command.encode(), ctype.encode(), str(n).encode()) + body)

    do_POST = do_PUT = do_DELETE = echo


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        sock, _ = super().get_request()
        return sock, ("unix", 0)  # the handler expects a (host, port) address


class TCPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    kind, _, where = sys.argv[1].partition(":")
    if kind == "unix":
        if os.path.exists(where):
            os.unlink(where)
        server = UnixServer(where, Handler)
    else:
        cert, key, ca = sys.argv[2:5]
        server = TCPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.load_verify_locations(ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        with open(where + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.rename(where + ".tmp", where)
    server.serve_forever()


if __name__ == "__main__":
    main()
