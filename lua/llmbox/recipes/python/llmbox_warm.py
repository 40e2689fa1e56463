# llmbox's warm start for Python: an interpreter started ahead of time in a fresh, never-used
# sandbox of a pool, waiting for the one program it will run. It makes that program see what
# `python3 -u /tmp/llmbox/main.py ARGS` would show it: the same file, argv, sys.path[0],
# __main__ module, working directory, tracebacks and exit status. Startup (site, sitecustomize,
# the plot hooks) has already happened, which is the point: it costs ~25 ms otherwise.
#
# Protocol (fd 3, a socket to the supervisor; in a container, a FIFO to read from): write b"R"
# once ready, then read the request until
# EOF: b"1\0" FILE b"\0" CWD b"\0" NARGS b"\0" (ARG b"\0") * NARGS, then the code. When the
# program is done, report "exit STATUS UTIME_US STIME_US MAXRSS_KB PROBE\n" on the same socket
# (see llmbox.h) so the result does not wait for this interpreter's teardown.
import fcntl
import os
import sys

# The plots directory the supervisor would probe, read before the program can change os.environ.
_LLMBOX_PROBE = os.environ.get("LLMBOX_PLOTS_DIR")
_LLMBOX_CTL = []


def _llmbox_request():
    from llmbox_preload import preload  # a pool's `preload`, as if the program's first lines

    preload()
    try:
        os.write(3, b"R")
    except OSError:
        pass  # a container's warm wrapper hands over a read-only FIFO: no "R", no exit report
    chunks = []
    while True:
        b = os.read(3, 1 << 16)
        if not b:
            break
        chunks.append(b)
    # Off fd 3, which a program started cold would find free, and never inherited by children.
    _LLMBOX_CTL.append(fcntl.fcntl(3, fcntl.F_DUPFD_CLOEXEC, 10))
    os.close(3)
    data = b"".join(chunks)
    version, path, cwd, nargs, rest = data.split(b"\0", 4)
    if version != b"1":
        raise SystemExit("llmbox: unknown warm-start request version %r" % version)
    fields = rest.split(b"\0", int(nargs))
    enc = sys.getfilesystemencoding()
    args = [a.decode(enc, "surrogateescape") for a in fields[:-1]]
    return path.decode(enc, "surrogateescape"), cwd.decode(enc, "surrogateescape"), args, fields[-1]


def _llmbox_run():
    path, cwd, args, code = _llmbox_request()
    with open(path, "wb") as f:  # tracebacks quote source lines from the file
        f.write(code)
    os.chdir(cwd)
    sys.argv = [path] + args
    sys.path[0] = os.path.dirname(path)
    main = type(sys)("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    try:
        exec(compile(code, path, "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        # Report it as the interpreter would, without this file's frame.
        tb = e.__traceback__
        if tb is not None and tb.tb_frame.f_code is _llmbox_run.__code__:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        sys.exit(130 if isinstance(e, KeyboardInterrupt) else 1)


def _llmbox_exit(status):
    # What interpreter shutdown does that a program can observe, in its order: join threads,
    # run atexit handlers, flush the standard streams, drop the program's objects (files left
    # open get flushed and closed); then skip the cycle collection and the slow module-by-module teardown.
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit
    atexit._run_exitfuncs()
    main = sys.modules.get("__main__")
    if main is not None:
        main.__dict__.clear()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if _LLMBOX_CTL:
        try:
            _llmbox_report(status)
        except Exception:
            pass  # the supervisor then waits for the exit itself
    os._exit(status)


def _llmbox_report(status):
    t = os.times()
    user = int((t.user + t.children_user) * 1e6)
    system = int((t.system + t.children_system) * 1e6)
    rss = 0
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmHWM:"):
                rss = int(line.split()[1])
    probe = 0
    if _LLMBOX_PROBE:
        try:
            probe = 1 if os.listdir(_LLMBOX_PROBE) else 0
        except OSError:
            pass
    for fd in (1, 2):  # the end of the output: nothing more comes from this process
        try:
            os.close(fd)
        except OSError:
            pass
    os.write(_LLMBOX_CTL[0], b"exit %d %d %d %d %d\n" % (status, user, system, rss, probe))


def _llmbox_status(code):
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


try:
    _llmbox_run()
    _llmbox_exit(0)
except SystemExit as e:
    _llmbox_exit(_llmbox_status(e.code))
