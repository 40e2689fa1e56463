"""The Kubernetes stand-in's pods (see k8s_standin.py): a pod is a sandbox of llmbox's native
backend run by k8s_pod.lua (the Agent), in which execs run side by side; its main process (Main)
is its container's command; Feed streams an exec's stdin in through a FIFO."""
import base64
import json
import os
import queue
import shutil
import subprocess
import threading
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class Agent:
    """A pod's sandbox: k8s_pod.lua's process, whose execs run side by side (each its id)."""

    def __init__(self, fifos, memory, pod_env, sizes, mounts):
        # the execs' stdin FIFOs (in fifos), which the pod sees read-only at /run/standin
        self.dir = os.path.join(fifos, "pod-" + uuid.uuid4().hex)
        os.mkdir(self.dir)
        os.chmod(self.dir, 0o755)
        env = dict(os.environ, LUA_PATH="%s/lua/?.lua;%s/lua/?/init.lua;;" % (ROOT, ROOT),
                   LUA_CPATH="%s/build/lib/?.so;;" % ROOT)
        self.proc = subprocess.Popen(["luajit", os.path.join(HERE, "k8s_pod.lua"), str(memory), json.dumps(pod_env),
                                      str(sizes.get("/sandbox", 0)), str(sizes.get("/tmp", 0)), self.dir,
                                      json.dumps(mounts)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lock = threading.Lock()  # (the requests' writes)
        self.mounts = mounts
        self.execs = {}  # id -> queue.Queue of the agent's answers for that exec
        self.next_id = 0
        first = json.loads(self.proc.stdout.readline() or b'{"error": "the pod agent ended"}')
        self.error = first.get("error")
        if not self.error:
            threading.Thread(target=self.answers, daemon=True).start()

    def answers(self):
        """Hands each of the agent's answers to its exec; at the agent's end, every exec fails."""
        for line in self.proc.stdout:
            msg = json.loads(line)
            q = self.execs.get(msg.get("id"))
            if q:
                q.put(msg)
        for q in list(self.execs.values()):
            q.put({"error": "the pod's sandbox is gone"})

    def exec(self, argv, feed, on_output, cancel):
        """Runs argv in the pod; cancel: a path whose creation stops it. -> exit code, error"""
        with self.lock:
            self.next_id += 1
            xid = self.next_id
            q = self.execs[xid] = queue.Queue()
            req = {"id": xid, "argv": argv, "cancel": cancel}
            if feed:
                req["stdin_fifo"] = "/run/standin/" + os.path.basename(feed.path)
            try:
                self.proc.stdin.write(json.dumps(req).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:
                del self.execs[xid]
                return None, "the pod's sandbox is gone"
        try:
            while True:
                msg = q.get()
                if "stream" in msg:
                    on_output(msg["stream"], base64.b64decode(msg["data"]))
                elif "exit" in msg:
                    return msg["exit"], None
                else:
                    return None, msg.get("error")
        finally:
            self.execs.pop(xid, None)

    def stop(self, at_once=False):
        if at_once:  # the pod is deleted: its processes go, as a container's do
            self.proc.kill()
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
        for m in self.mounts:
            shutil.rmtree(m["src"], ignore_errors=True)


class Main:
    """A pod's main process: its container's command and args, run in its sandbox from the pod's
    start (the stand-in has no image entrypoints: a container without a command has none). Attach
    streams its output from then on to every attached client, and their stdin to it when the
    container has stdin: true. When it ends the pod ends (restartPolicy Never): Succeeded or
    Failed (on_end(code))."""

    def __init__(self, agent, argv, container, cancel, on_end):
        self.subscribers = []
        self.sublock = threading.Lock()
        self.done = threading.Event()
        self.stdin_once = bool(container.get("stdinOnce"))
        self.feed = Feed(agent.dir, self.done) if container.get("stdin") else None
        self.exit = None
        threading.Thread(target=self.run, args=(agent, argv, cancel, on_end), daemon=True).start()

    def subscribe(self, out):
        with self.sublock:
            self.subscribers.append(out)

    def unsubscribe(self, out):
        with self.sublock:
            if out in self.subscribers:
                self.subscribers.remove(out)

    def output(self, stream, data):
        with self.sublock:
            subs = list(self.subscribers)
        for out in subs:
            try:
                out(stream, data)
            except OSError:  # that client went away
                self.unsubscribe(out)

    def run(self, agent, argv, cancel, on_end):
        code, err = agent.exec(argv, self.feed, self.output, cancel)
        self.exit = code if err is None else 137
        self.done.set()
        on_end(self.exit)


class Feed:
    """An exec's stdin as it streams in: a FIFO in the pod's directory, written by a thread of its
    own (its open waits for the command's), ended when the client ends stdin or goes away."""

    def __init__(self, directory, done):
        self.path = os.path.join(directory, "in-" + uuid.uuid4().hex)
        os.mkfifo(self.path)
        os.chmod(self.path, 0o644)
        self.done = done
        self.chunks = []
        self.cond = threading.Condition()
        self.ended = False
        threading.Thread(target=self.pump, daemon=True).start()

    def write(self, data):
        with self.cond:
            self.chunks.append(data)
            self.cond.notify()

    def close(self):
        with self.cond:
            self.ended = True
            self.cond.notify()

    def pump(self):
        fd = None
        while fd is None and not self.done.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: the command has not opened it yet
                self.done.wait(0.005)
        try:
            if fd is None:
                return
            os.set_blocking(fd, True)
            while True:
                with self.cond:
                    while not self.chunks and not self.ended:
                        self.cond.wait()
                    chunks, self.chunks = self.chunks, []
                    ended = self.ended
                for c in chunks:
                    os.write(fd, c)
                if ended:
                    return
        except OSError:  # the command went away
            pass
        finally:
            if fd is not None:
                os.close(fd)
            os.unlink(self.path)
