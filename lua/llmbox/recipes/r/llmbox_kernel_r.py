# llmbox's interactive R, the relay: it speaks llmbox's cell protocol on fd 3 (runtime/cell.c;
# the same words as the Python kernel, recipes/python/llmbox_kernel.py) and drives one R process
# (llmbox_kernel.R), which keeps the cells' state. R cannot read a socket or run a second thread,
# so the relay does both: each cell's code goes to a file, its number to R's standard input; an
# interrupt is a SIGINT to R while a cell runs; R's answer comes back on a pipe (its fd 4) and is
# passed on with the cell's tag and value. R writes the cells' output straight to the run's stdout
# and stderr. When R ends, so does the relay, and llmbox reports the state lost.
import fcntl
import os
import signal
import subprocess
import sys
import threading

VALUE_MAX = 64 * 1024
CELLS = os.path.join(os.environ.get("TMPDIR", "/tmp"), "llmbox-cells")
PLOTS = os.environ.get("LLMBOX_PLOTS_DIR")
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    os.write(3, b"R")
    ctl = fcntl.fcntl(3, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(3)
    os.makedirs(CELLS, mode=0o700, exist_ok=True)
    answers_r, answers_w = os.pipe()
    os.set_inheritable(answers_w, True)
    env = dict(os.environ, LLMBOX_CELL_DIR=CELLS)
    r = subprocess.Popen(["/usr/bin/R", "--no-save", "--no-restore", "--quiet", "--no-echo",
                          "-f", os.path.join(HERE, "llmbox_kernel.R")],
                         stdin=subprocess.PIPE, env=env, pass_fds=(answers_w,),
                         preexec_fn=lambda: os.dup2(answers_w, 4))
    os.close(answers_w)
    answers = os.fdopen(answers_r, "rb")
    lock = threading.Lock()
    state = {"running": None}  # the tag of the cell R runs
    number = [0]

    def cpu():
        try:
            with open("/proc/%d/stat" % r.pid, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) * 1e6 / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0

    def start(tag, code):
        number[0] += 1
        n = number[0]
        if PLOTS:
            for name in os.listdir(PLOTS) if os.path.isdir(PLOTS) else []:
                os.unlink(os.path.join(PLOTS, name))
        with open(os.path.join(CELLS, "%d.R" % n), "wb") as f:
            f.write(code)
        with lock:
            state["running"] = (tag, n, cpu())
        r.stdin.write(b"%d\n" % n)
        r.stdin.flush()

    def finish():
        line = answers.readline()
        if not line:
            # R is gone (quit(), a limit): the run ends with its status, and llmbox says the
            # state is lost
            os._exit(r.wait() & 0xFF)
        n, status, plots = (int(x) for x in line.split())
        with lock:
            tag, _, t0 = state["running"]
            state["running"] = None
        value = b""
        vpath = os.path.join(CELLS, "%d.value" % n)
        if os.path.exists(vpath):
            with open(vpath, "rb") as f:
                value = f.read(VALUE_MAX + 1).rstrip(b"\n")
            if len(value) > VALUE_MAX:
                value = value[:VALUE_MAX] + b"..."
            os.unlink(vpath)
        os.unlink(os.path.join(CELLS, "%d.R" % n))
        msg = b"done %s %d %d %d %d\n" % (tag, status, max(0, cpu() - t0), plots, len(value)) + value
        while msg:
            msg = msg[os.write(ctl, msg):]

    buf = b""
    while True:
        data = os.read(ctl, 1 << 16)
        if not data:
            r.kill()
            os._exit(0)
        buf += data
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            head = buf[:nl].split(b" ")
            if head == [b"I"]:
                buf = buf[nl + 1:]
                with lock:
                    if state["running"]:
                        os.kill(r.pid, signal.SIGINT)
                continue
            if len(head) != 3 or head[0] != b"cell":
                os._exit(70)
            size = int(head[2])
            if len(buf) < nl + 1 + size:
                break
            code = buf[nl + 1:nl + 1 + size]
            buf = buf[nl + 1 + size:]
            start(head[1], code)
            threading.Thread(target=finish, daemon=True).start()


if __name__ == "__main__":
    main()
