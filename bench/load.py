"""Load for `llmbox serve` (make bench): N clients, each its own keep-alive connection over the
daemon's unix socket, POSTing one run after another for a time or up to a number of requests.
Prints one JSON object: requests, errors (and the first), latency quantiles in ms, requests/s.

    python3 bench/load.py SOCKET CLIENTS (--seconds S | --requests N) [BODY]
"""
import http.client
import json
import socket
import sys
import threading
import time


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("llmbox", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(self.path)


def main():
    sock, clients, mode, amount = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    body = sys.argv[5] if len(sys.argv) > 5 else '{"code": "print(1)"}'
    lock = threading.Lock()
    state = {"left": int(amount) if mode == "--requests" else None, "errors": 0, "first_error": None}
    latencies = []
    deadline = time.monotonic() + amount if mode == "--seconds" else None

    def take():
        with lock:
            if state["left"] is None:
                return time.monotonic() < deadline
            if state["left"] <= 0:
                return False
            state["left"] -= 1
            return True

    def client():
        conn = UnixConnection(sock)
        mine = []
        while take():
            t0 = time.monotonic()
            try:
                conn.request("POST", "/v1/run", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                ok = resp.status == 200 and json.loads(data).get("stdout") == "1\n"
                why = None if ok else "HTTP %d: %s" % (resp.status, data[:200])
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = UnixConnection(sock)
            except Exception as e:  # a refused or dropped connection is an error of the run
                ok, why = False, repr(e)
                conn.close()
                conn = UnixConnection(sock)
            mine.append((time.monotonic() - t0) * 1000)
            if not ok:
                with lock:
                    state["errors"] += 1
                    state["first_error"] = state["first_error"] or why
        with lock:
            latencies.extend(mine)

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    latencies.sort()

    def q(p):
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else None

    print(json.dumps({"requests": len(latencies), "errors": state["errors"], "first_error": state["first_error"],
                      "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": latencies[-1] if latencies else None,
                      "rps": len(latencies) / elapsed if elapsed > 0 else 0, "seconds": elapsed}))


if __name__ == "__main__":
    main()
