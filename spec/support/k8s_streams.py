"""The Kubernetes stand-in's stream protocols for exec and attach (see k8s_standin.py): after the
HTTP upgrade, both carry the same channels (stdin, stdout, stderr and the error channel with the
command's Status), and both give the handler one interface:

    send(stream, data)   stream "stdout" or "stderr"
    recv()               ("stdin", data), ("stdin-end", None), or None once the client is gone
    finish(status)       the Status on the error channel, then the end of the connection

WebSocket: RFC 6455 with the channel subprotocols v5.channel.k8s.io and v4.channel.k8s.io (one
byte naming the channel, then its data; v5 adds the close of a channel). SPDY/3.1 with
v4.channel.k8s.io: what kubectl before 1.30 speaks (and later ones when websockets are refused or
KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false): the client opens one stream per channel, named by its
streamType header; stdin ends with the client's FIN on its stream. Only what those clients use:
no server push, no flow control (the Go client, spdystream, has none either).
"""
import json
import queue
import struct
import threading
import zlib


class WebSocket:
    """The server's side of RFC 6455, as much as exec needs: binary messages out, the client's
    (masked) messages in, close and ping answered."""

    def __init__(self, rfile, wfile):
        self.rfile, self.wfile = rfile, wfile
        self.wlock = threading.Lock()

    def frame(self, opcode, data):
        head = bytes([0x80 | opcode])
        n = len(data)
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack(">H", n)
        else:
            head += bytes([127]) + struct.pack(">Q", n)
        with self.wlock:
            try:
                self.wfile.write(head + data)
                self.wfile.flush()
            except (OSError, ValueError):  # the client went away
                pass

    def send(self, data):
        self.frame(2, data)

    def close(self):
        self.frame(8, struct.pack(">H", 1000))

    def recv(self):
        try:
            return self.read_message()
        except (OSError, ValueError, struct.error):  # the client went away
            return None

    def read_message(self):
        message = b""
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return None
            opcode, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if opcode == 8:
                self.close()
                return None
            if opcode == 9:
                self.frame(10, data)
                continue
            if opcode == 10:
                continue
            message += data
            if head[0] & 0x80:
                return message


class WebSocketChannels:
    """The channel protocol over a websocket: channel 0 stdin, 1 stdout, 2 stderr, 3 the Status;
    v5's close of a channel is 255 followed by the channel's number."""

    CHANNEL = {"stdout": 1, "stderr": 2}

    def __init__(self, rfile, wfile):
        self.ws = WebSocket(rfile, wfile)
        for channel in (1, 2, 3):  # the API server announces each channel with an empty message
            self.ws.send(bytes([channel]))

    def send(self, stream, data):
        self.ws.send(bytes([self.CHANNEL[stream]]) + data)

    def recv(self):
        while True:
            msg = self.ws.recv()
            if msg is None:
                return None
            if msg[:1] == b"\x00":
                return ("stdin", msg[1:])
            if msg == b"\xff\x00":
                return ("stdin-end", None)
            # (channel 4, a terminal's size: the stand-in has no terminals)

    def finish(self, status):
        self.ws.send(b"\x03" + json.dumps(status).encode())
        self.ws.close()


# SPDY/3's header compression starts from this dictionary (the draft's section 2.6.10.1): the
# names and values HTTP headers use most, each but the last part prefixed by its length
_WORDS = ("options head post put delete trace accept accept-charset accept-encoding accept-language "
          "accept-ranges age allow authorization cache-control connection content-base content-encoding "
          "content-language content-length content-location content-md5 content-range content-type date etag "
          "expect expires from host if-match if-modified-since if-none-match if-range if-unmodified-since "
          "last-modified location max-forwards pragma proxy-authenticate proxy-authorization range referer "
          "retry-after server te trailer transfer-encoding upgrade user-agent vary via warning www-authenticate "
          "method get status").split() + ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
                                           "keep-alive", "origin"]
_TAIL = ("100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
         "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
         "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
         "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
         "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
         "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")
SPDY_DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()
assert len(SPDY_DICTIONARY) == 1423 and zlib.adler32(SPDY_DICTIONARY) == 0xE3C6A7C2

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
MAX_DATA = (1 << 24) - 1


class SpdyChannels:
    """The channel protocol over SPDY/3.1, the server's side. wanted: the stream types the
    request's options call for ("error" always; "stdin", "stdout", "stderr" as asked). Frames
    are read by a thread of their own, which answers each new stream at once (the client waits
    for the answer before opening the next) and pings."""

    def __init__(self, rfile, wfile, wanted):
        self.rfile, self.wfile = rfile, wfile
        self.wanted = set(wanted)
        self.streams = {}  # streamType -> stream id
        self.cond = threading.Condition()
        self.events = queue.Queue()
        self.wlock = threading.Lock()
        self.inflate = zlib.decompressobj(zdict=SPDY_DICTIONARY)  # one zlib stream per direction
        self.deflate = zlib.compressobj(zdict=SPDY_DICTIONARY)
        self.gone = False
        self.error = None
        threading.Thread(target=self.read_frames, daemon=True).start()

    def wait_streams(self, timeout):
        """None once the client has opened every wanted stream; else why not."""
        with self.cond:
            self.cond.wait_for(lambda: self.wanted <= set(self.streams) or self.gone, timeout)
            if self.wanted <= set(self.streams):
                return None
            missing = ", ".join(sorted(self.wanted - set(self.streams)))
            return self.error or ("the client went away" if self.gone else
                                  "timed out waiting for the client to create the streams: " + missing)

    def write(self, frame):
        with self.wlock:
            try:
                self.wfile.write(frame)
                self.wfile.flush()
            except (OSError, ValueError):  # the client went away
                pass

    def control(self, kind, flags, payload):
        return struct.pack(">HHI", 0x8000 | 3, kind, (flags << 24) | len(payload)) + payload

    def data(self, sid, flags, payload):
        return struct.pack(">II", sid & 0x7FFFFFFF, (flags << 24) | len(payload)) + payload

    def headers(self, pairs):
        block = struct.pack(">I", len(pairs)) + b"".join(
            struct.pack(">I", len(k)) + k + struct.pack(">I", len(v)) + v for k, v in pairs)
        with self.wlock:  # (the compressor is one stream: blocks go out in its order)
            return self.deflate.compress(block) + self.deflate.flush(zlib.Z_SYNC_FLUSH)

    def parse_headers(self, compressed):
        block = self.inflate.decompress(compressed)
        (n,), at, pairs = struct.unpack_from(">I", block), 4, {}
        for _ in range(n):
            (k,) = struct.unpack_from(">I", block, at)
            name = block[at + 4:at + 4 + k].decode().lower()
            at += 4 + k
            (k,) = struct.unpack_from(">I", block, at)
            pairs[name] = block[at + 4:at + 4 + k].decode()
            at += 4 + k
        return pairs

    def read_exact(self, n):
        data = self.rfile.read(n)
        if len(data) < n:
            raise EOFError
        return data

    def read_frames(self):
        try:
            while True:
                first, word = struct.unpack(">II", self.read_exact(8))
                flags, length = word >> 24, word & 0xFFFFFF
                payload = self.read_exact(length)
                if not first & 0x80000000:
                    self.on_data(first & 0x7FFFFFFF, flags, payload)
                    continue
                kind = first & 0xFFFF
                if kind == SYN_STREAM:
                    sid = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
                    pairs = self.parse_headers(payload[10:])
                    self.write(self.control(SYN_REPLY, 0, struct.pack(">I", sid) + self.headers([])))
                    with self.cond:
                        self.streams[pairs.get("streamtype", "")] = sid
                        self.cond.notify_all()
                    if flags & FLAG_FIN:
                        self.on_data(sid, FLAG_FIN, b"")
                elif kind == PING:
                    self.write(self.control(PING, 0, payload))
                elif kind == RST_STREAM:
                    self.on_data(struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF, FLAG_FIN, b"")
                elif kind == GOAWAY:
                    break
                # (SETTINGS, WINDOW_UPDATE, HEADERS: nothing the channels need)
        except (OSError, ValueError, EOFError, struct.error, zlib.error) as e:
            if isinstance(e, zlib.error):
                self.error = "the client's SPDY headers do not decompress: %s" % e
        with self.cond:
            self.gone = True
            self.cond.notify_all()
        self.events.put(None)

    def on_data(self, sid, flags, payload):
        if sid != self.streams.get("stdin"):
            return  # (the client sends nothing else: its side of the others ends at once)
        if payload:
            self.events.put(("stdin", payload))
        if flags & FLAG_FIN:
            self.events.put(("stdin-end", None))

    def send(self, stream, data):
        sid = self.streams.get(stream)
        if sid is None:  # (not asked for)
            return
        for at in range(0, len(data), MAX_DATA):
            self.write(self.data(sid, 0, data[at:at + MAX_DATA]))

    def recv(self):
        return self.events.get()

    def finish(self, status):
        """The Status on the error stream, every stream ended, then GOAWAY and the end of the
        connection, as the kubelet ends one."""
        if "error" in self.streams:
            self.write(self.data(self.streams["error"], FLAG_FIN, json.dumps(status).encode()))
        for name, sid in self.streams.items():
            if name != "error":
                self.write(self.data(sid, FLAG_FIN, b""))
        self.write(self.control(GOAWAY, 0, struct.pack(">II", 0, 0)))
