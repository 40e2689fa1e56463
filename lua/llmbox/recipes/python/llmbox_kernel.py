# llmbox's interactive Python: one interpreter that stays alive in the sandbox and runs cells,
# each in the namespace the cells before it left (variables, imports, functions, open files).
#
# Protocol (fd 3, a socket to llmbox's supervisor; runtime/cell.c has the words): write b"R"
# once ready; then, for each b"cell TAG LEN\n" + LEN bytes of code, run the code and answer
# b"done TAG STATUS CPU_US PLOTS LEN\n" + LEN bytes of the value (the repr of the cell's last
# expression, when it is one and not None). b"I\n" interrupts the cell in progress
# (KeyboardInterrupt). The supervisor owns the limits: a cell that ignores the interrupt is ended
# with its interpreter, and the program can end only its own cell through this socket (an answer
# with an old tag is dropped).
import ast
import fcntl
import importlib
import linecache
import os
import signal
import sys
import threading
import traceback

VALUE_MAX = 64 * 1024  # the repr of a cell's value, at most (then cut, with "...")
_PLOTS = os.environ.get("LLMBOX_PLOTS_DIR")


def _ctl_fd():
    os.write(3, b"R")
    fd = fcntl.fcntl(3, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(3)  # off fd 3, which the user's code would find free in an ordinary run
    return fd


class _Channel:
    """Reads the supervisor's words in a thread of its own: cells are queued for the main
    thread, interrupts are delivered to it as SIGINT while a cell runs (a real signal, so that a
    blocking call such as time.sleep is interrupted too)."""

    def __init__(self, fd):
        self.fd = fd
        self.cells = []
        self.cond = threading.Condition()
        self.running = False
        self.closed = False
        self.main = threading.main_thread().ident

    def reader(self):
        buf = b""
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                with self.cond:
                    self.closed = True
                    self.cond.notify()
                return
            buf += data
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                head = buf[:nl].split(b" ")
                if head == [b"I"]:
                    buf = buf[nl + 1:]
                    with self.cond:
                        if self.running:
                            signal.pthread_kill(self.main, signal.SIGINT)
                    continue
                if len(head) != 3 or head[0] != b"cell":
                    os._exit(70)  # not llmbox talking: nothing sensible to do
                size = int(head[2])
                if len(buf) < nl + 1 + size:
                    break
                code = buf[nl + 1:nl + 1 + size]
                buf = buf[nl + 1 + size:]
                with self.cond:
                    self.cells.append((head[1], code))
                    self.cond.notify()

    def next_cell(self):
        with self.cond:
            while not self.cells and not self.closed:
                self.cond.wait()
            if not self.cells:
                return None
            self.running = True
            return self.cells.pop(0)

    def done(self, tag, status, cpu_us, plots, value):
        with self.cond:
            self.running = False
        msg = b"done %s %d %d %d %d\n" % (tag, status, cpu_us, plots, len(value)) + value
        while msg:
            n = os.write(self.fd, msg)
            msg = msg[n:]


def _status_of(code):
    # SystemExit's code as the interpreter turns it into an exit status
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


_KERNEL_FILES = (__file__, ast.__file__)


def _show_error(e):
    # the traceback as the interpreter would print it, without the kernel's frames (and a
    # syntax error's without any: it happened before the cell ran)
    te = traceback.TracebackException(type(e), e, e.__traceback__)
    keep = [] if isinstance(e, SyntaxError) else [f for f in te.stack if f.filename not in _KERNEL_FILES]
    te.stack = traceback.StackSummary.from_list(keep)
    sys.stderr.write("".join(te.format()))


def _repr(v):
    try:
        r = repr(v)
    except BaseException as e:  # a broken __repr__ is the cell's value, not the kernel's fault
        r = "<repr failed: %s: %s>" % (type(e).__name__, e)
    if len(r) > VALUE_MAX:
        r = r[:VALUE_MAX] + "..."
    return r.encode("utf-8", "surrogateescape")


def _clear_plots():
    if not _PLOTS:
        return
    try:
        for name in os.listdir(_PLOTS):
            os.unlink(os.path.join(_PLOTS, name))
    except OSError:
        pass


def _capture_plots():
    # as a notebook's inline backend: the figures a cell drew are shown (saved) and closed
    backend = sys.modules.get("llmbox_mpl_backend")
    if backend is not None:
        try:
            backend.show()
        except Exception:
            pass
    try:
        return 1 if _PLOTS and os.listdir(_PLOTS) else 0
    except OSError:
        return 0


# An interrupt counts only while the user's code runs: one that comes as a cell ends must not
# break the kernel's own work (answering the cell).
_IN_CELL = [False]


def _on_sigint(signum, frame):
    if _IN_CELL[0]:
        raise KeyboardInterrupt


def _fresh_imports():
    # a library installed since the last cell (s:install, %pip) is importable in this one: drop
    # what the import system cached about directories that did not exist or have changed
    for path, finder in list(sys.path_importer_cache.items()):
        if finder is None:
            del sys.path_importer_cache[path]
    importlib.invalidate_caches()


def _run_cell(ns, number, code):
    name = "<cell %d>" % number
    source = code.decode("utf-8", "surrogateescape")
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    value = b""
    _IN_CELL[0] = True
    try:
        tree = ast.parse(source, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, "exec"), ns)
        if last is not None:
            v = eval(compile(last, name, "eval"), ns)
            if v is not None:
                ns["_"] = v
                value = _repr(v)
        status = 0
    except SystemExit as e:
        status = _status_of(e.code)
    except KeyboardInterrupt as e:
        _show_error(e)
        status = 130
    except BaseException as e:
        _show_error(e)
        status = 1
    finally:
        _IN_CELL[0] = False
    return status, value


def main():
    from llmbox_preload import preload  # an interactive pool's (a cell still imports, at no cost)

    preload()
    signal.signal(signal.SIGINT, _on_sigint)
    channel = _Channel(_ctl_fd())
    threading.Thread(target=channel.reader, daemon=True).start()
    main_mod = type(sys)("__main__")
    main_mod.__builtins__ = __builtins__
    sys.modules["__main__"] = main_mod
    sys.argv = [""]
    sys.path[0] = os.getcwd()
    ns = main_mod.__dict__
    number = 0
    while True:
        cell = channel.next_cell()
        if cell is None:
            break
        tag, code = cell
        number += 1
        _clear_plots()
        _fresh_imports()
        t0 = os.times()
        status, value = _run_cell(ns, number, code)
        plots = _capture_plots()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        t1 = os.times()
        cpu = int(((t1.user + t1.system + t1.children_user + t1.children_system)
                   - (t0.user + t0.system + t0.children_user + t0.children_system)) * 1e6)
        channel.done(tag, status, max(cpu, 0), plots, value)
    os._exit(0)


if __name__ == "__main__":
    main()
