"""llmbox_client: a Python client for `llmbox serve`, shaped like llm-sandbox's SandboxSession.

One module, the standard library only (Python 3.8 or later; tested with 3.11): copy it next to
your program. Code written for llm-sandbox switches with its import line::

    from llmbox_client import SandboxSession        # was: from llm_sandbox import SandboxSession

    with SandboxSession(lang="python") as session:
        result = session.run("print(6 * 7)")
        print(result.stdout, result.exit_code)

The sandboxes are the daemon's (`llmbox serve`): this module only speaks its JSON over HTTP/1.1,
on a unix socket (``unix:/path``) or TCP (``HOST:PORT`` or ``http://HOST:PORT``, with a bearer
token). Where the server is: the ``server`` argument, else ``$LLMBOX_SERVER``, else the daemon's
own default socket (``/run/llmbox/llmbox.sock`` as root, else ``$XDG_RUNTIME_DIR/llmbox.sock``).
The token: the ``token`` argument, else ``$LLMBOX_TOKEN``.

Two kinds of failure are kept apart, as the daemon keeps them apart:

- the sandbox or the daemon failed, or refused the request (an unknown language, a policy that
  forbids the code, a closed session, no server): `LlmboxError`, carrying the HTTP status and the
  daemon's error code and message;
- the program failed, or hit a limit: a normal `Result`, with its exit code, ``timed_out`` and
  ``limit``. A timeout is a result, not an exception.
"""

import base64
import enum
import http.client
import io
import json
import logging
import os
import posixpath
import shlex
import socket
import stat
import tarfile
import urllib.parse
import warnings

__all__ = [
    "SandboxSession", "ArtifactSandboxSession", "Client", "Result", "ConsoleOutput", "ExecutionResult",
    "PlotOutput", "FileType", "LlmboxError", "SandboxException", "run", "default_server", "parse_server",
    "extract_tar",
]

__version__ = "0.1.0"

log = logging.getLogger("llmbox_client")

# How long to wait for an answer beyond the run's own timeout (installs, queueing for a slot), and
# for a run that names no timeout (the daemon applies its policy's; this only bounds the wait).
_MARGIN_S = 60
_UNBOUNDED_RUN_S = 3600
# Requests that run nothing (create, delete, files, listings).
_QUICK_S = 120


# ---------------------------------------------------------------------------------------------
# errors


class LlmboxError(Exception):
    """The daemon refused or failed a request, or could not be reached.

    status   the HTTP status (400, 401, 403, 404, 413, 422, 503, ...), or None when no answer came
    code     the daemon's error code ("bad_request", "unauthorized", "no_session", "refused",
             "not_found", ...), or "unreachable" / "no_answer" / "not_open" / "unsafe_archive"
             for failures found on this side
    message  the daemon's message (it says what to fix)
    server   the server's address, as given
    body     the whole decoded error object (e.g. ``violations`` for a refused run), or {}
    """

    def __init__(self, status, code, message, server=None, body=None):
        self.status = status
        self.code = code
        self.message = message
        self.server = server
        self.body = body or {}
        self.violations = self.body.get("violations")
        # (the messages made on this side name the server themselves)
        prefix = f"HTTP {status} {code} from {server}" if status else code
        super().__init__(f"{prefix}: {message}")


# llm-sandbox's base exception name, for `except SandboxException:` in switched code
SandboxException = LlmboxError


# ---------------------------------------------------------------------------------------------
# results


class FileType(str, enum.Enum):
    """A plot's format. A str, so ``plot.format == "png"`` and llm-sandbox's ``plot.format.value``
    both work."""

    PNG = "png"
    JPEG = "jpeg"
    PDF = "pdf"
    SVG = "svg"
    CSV = "csv"
    JSON = "json"
    TXT = "txt"
    HTML = "html"

    def __str__(self):
        return self.value

    def __format__(self, spec):
        return format(self.value, spec)


class PlotOutput:
    """A figure the run produced: ``data`` (the bytes: a PNG, or Plotly's HTML), ``format``,
    ``width`` and ``height`` (pixels, when known). ``content_base64`` is llm-sandbox's name for
    the same bytes, base64-encoded, as the daemon sent them."""

    __slots__ = ("format", "data", "width", "height", "dpi", "content_base64")

    def __init__(self, doc):
        fmt = doc.get("format") or "png"
        try:
            self.format = FileType(fmt)
        except ValueError:
            self.format = fmt
        self.content_base64 = doc.get("data") or ""
        self.data = base64.b64decode(self.content_base64)
        self.width = doc.get("width")
        self.height = doc.get("height")
        self.dpi = doc.get("dpi")

    def save(self, path):
        """Writes the plot's bytes to ``path``."""
        with open(path, "wb") as f:
            f.write(self.data)

    def __repr__(self):
        return (f"PlotOutput(format={str(self.format)!r}, width={self.width}, height={self.height}, "
                f"{len(self.data)} bytes)")


class Result:
    """What a run, a command or an install gave: the result object ``llmbox run --json`` prints.

    stdout, stderr   text (the daemon repairs invalid UTF-8)
    exit_code        the program's exit status (137 when it was killed by a limit)
    plots            [PlotOutput]: figures captured from matplotlib, seaborn, Plotly
    timed_out        True when the wall-clock timeout stopped it
    limit            the limit that stopped it ("timeout", "memory", "output", ...), or None
    duration_ms, cpu_ms, signal, truncated, phase   as the daemon reports them
    raw              the decoded JSON object, whole

    llm-sandbox's names for it, ConsoleOutput and ExecutionResult, are aliases of this class.
    """

    def __init__(self, doc, plots=True):
        self.raw = doc
        self.stdout = doc.get("stdout") or ""
        self.stderr = doc.get("stderr") or ""
        self.exit_code = doc.get("exit_code")
        self.timed_out = bool(doc.get("timed_out"))
        self.limit = doc.get("limit")
        self.duration_ms = doc.get("duration_ms")
        self.cpu_ms = doc.get("cpu_ms")
        self.signal = doc.get("signal")
        self.truncated = bool(doc.get("truncated"))
        self.phase = doc.get("phase")
        self.plots = [PlotOutput(p) for p in doc.get("plots") or []] if plots else []

    def success(self):
        """True when the program exited 0 and no limit stopped it."""
        return self.exit_code == 0 and not self.limit

    def text(self):
        """llm-sandbox's deprecated accessor: the standard output."""
        warnings.warn("text() is deprecated: use .stdout", DeprecationWarning, stacklevel=2)
        return self.stdout

    def to_json(self, include_plots=False):
        """The result as JSON text; plots (base64) only when asked for."""
        doc = dict(self.raw)
        if not include_plots:
            doc.pop("plots", None)
        return json.dumps(doc, indent=2)

    def __repr__(self):
        extra = f", limit={self.limit!r}" if self.limit else ""
        return (f"Result(exit_code={self.exit_code!r}, stdout={self.stdout!r}, stderr={self.stderr!r}, "
                f"plots={len(self.plots)}{extra})")


ConsoleOutput = Result
ExecutionResult = Result


# ---------------------------------------------------------------------------------------------
# where the daemon is


def default_server(environ=None, euid=None):
    """The daemon's own default socket as a server address: ``unix:/run/llmbox/llmbox.sock`` as
    root, else ``unix:$XDG_RUNTIME_DIR/llmbox.sock``; None when neither applies."""
    environ = os.environ if environ is None else environ
    euid = os.geteuid() if euid is None else euid
    if euid == 0:
        return "unix:/run/llmbox/llmbox.sock"
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return f"unix:{runtime.rstrip('/')}/llmbox.sock"
    return None


def parse_server(addr):
    """``"unix:/path"`` -> ("unix", "/path"); ``"HOST:PORT"`` or ``"http://HOST:PORT"`` -> ("tcp",
    (host, port)). ValueError for anything else (https: the daemon has no TLS yet)."""
    if not isinstance(addr, str) or not addr:
        raise ValueError("the llmbox server's address is empty: give unix:/path or HOST:PORT")
    if addr.startswith("unix:"):
        path = addr[5:]
        if not path.startswith("/"):
            raise ValueError(f"server {addr!r}: the socket's path must be absolute (unix:/path)")
        return "unix", path
    rest = addr
    if "://" in addr:
        scheme, rest = addr.split("://", 1)
        if scheme != "http":
            raise ValueError(f"server {addr!r}: only http:// (the daemon has no TLS: put a TLS proxy in "
                             f"front of it and give its plain address here), unix:/path or HOST:PORT")
        rest = rest.rstrip("/")
    parts = urllib.parse.urlsplit("//" + rest)
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None or parts.path or parts.query:
        raise ValueError(f"server {addr!r}: expected unix:/path, HOST:PORT or http://HOST:PORT")
    return "tcp", (parts.hostname, port)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a unix socket: http.client's connection, with an AF_UNIX connect."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


# ---------------------------------------------------------------------------------------------
# the low-level client: one request, one connection


class Client:
    """The daemon's routes, one request per connection.

    A new connection each time: the daemon closes connections silent for 30 s, and retrying a POST
    that may have started a run is not safe, so no connection is kept for later.
    """

    def __init__(self, server=None, token=None, verbose=False):
        self.server = server or os.environ.get("LLMBOX_SERVER") or default_server()
        if not self.server:
            raise LlmboxError(None, "unreachable", "no llmbox server given, and no default socket: "
                              "$XDG_RUNTIME_DIR is not set; pass server='unix:/path' or set LLMBOX_SERVER")
        self.kind, self.where = parse_server(self.server)
        self.token = token if token is not None else os.environ.get("LLMBOX_TOKEN")
        self.verbose = verbose

    def _connection(self, timeout):
        if self.kind == "unix":
            return _UnixHTTPConnection(self.where, timeout)
        return http.client.HTTPConnection(self.where[0], self.where[1], timeout=timeout)

    def _how_to_start(self):
        if self.kind == "unix":
            return f"start one with: llmbox serve --listen {self.server}"
        return ("start one with: llmbox serve --config FILE, whose listen has "
                f"\"{self.where[0]}:{self.where[1]}\" (a TCP listener needs tokens)")

    def request(self, method, path, body=None, *, query=None, timeout=_QUICK_S, headers=None):
        """One request -> (status, headers, bytes) for a 2xx answer; LlmboxError otherwise.

        body: a dict or list (sent as JSON), bytes, or a binary file object (streamed; give its
        Content-Length in headers)."""
        url = path + ("?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote) if query else "")
        hdrs = {"Accept": "application/json"}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        elif body is not None:
            hdrs["Content-Type"] = "application/octet-stream"
        hdrs.update(headers or {})
        if self.verbose:
            log.debug("%s %s%s", method, self.server, url)
        conn = self._connection(timeout)
        try:
            try:
                conn.connect()
            except OSError as e:
                raise LlmboxError(None, "unreachable", f"cannot reach the llmbox server at {self.server}: "
                                  f"{e.strerror or e}; {self._how_to_start()}", self.server) from e
            try:
                conn.request(method, url, body=data, headers=hdrs)
            except OSError:
                # The daemon may refuse a request before reading its body (413 from its
                # Content-Length) and close: its answer is still there to read.
                pass
            try:
                resp = conn.getresponse()
                payload = resp.read()
            except (OSError, http.client.HTTPException) as e:
                what = "no answer" if isinstance(e, socket.timeout) else "the connection broke"
                raise LlmboxError(None, "no_answer", f"{what} from the llmbox server at {self.server} "
                                  f"({method} {path}, waited up to {timeout:g} s): {e}", self.server) from e
        finally:
            conn.close()
        if self.verbose:
            log.debug("-> %d (%d bytes)", resp.status, len(payload))
        if 200 <= resp.status < 300:
            return resp.status, resp.headers, payload
        err = {}
        try:
            doc = json.loads(payload)
            if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
                err = doc["error"]
        except ValueError:
            pass
        raise LlmboxError(resp.status, err.get("code", "http_error"),
                          err.get("message") or f"{resp.status} {resp.reason}: {payload[:200]!r}", self.server, err)

    def call(self, method, path, body=None, **kw):
        """A request whose answer is JSON -> the decoded answer."""
        _, _, payload = self.request(method, path, body, **kw)
        return json.loads(payload)

    # routes that need no session

    def health(self):
        """GET /healthz -> {"status": "ok", "version": ...}"""
        return self.call("GET", "/healthz")

    def languages(self):
        """GET /v1/languages -> [{name, aliases, extensions, description, plots, libraries}]"""
        return self.call("GET", "/v1/languages")

    def policies(self):
        """GET /v1/policies -> the policies, with their descriptions"""
        return self.call("GET", "/v1/policies")

    def run(self, code, lang="python", *, libraries=None, timeout=None, args=None, stdin=None, policy=None,
            plots=True):
        """POST /v1/run: one run in a fresh sandbox -> Result."""
        doc = _drop_none({"code": code, "lang": _lang_name(lang), "libraries": _strings(libraries, "libraries"),
                          "timeout": timeout, "args": _strings(args, "args"), "stdin": stdin, "policy": policy})
        return Result(self.call("POST", "/v1/run", doc, timeout=_wait(timeout)), plots=plots)


def run(code, lang="python", *, libraries=None, timeout=None, args=None, stdin=None, policy=None, server=None,
        token=None):
    """One run in a fresh sandbox, no session (POST /v1/run) -> Result.

    >>> run("print(6 * 7)").stdout
    '42\\n'
    """
    return Client(server, token).run(code, lang, libraries=libraries, timeout=timeout, args=args, stdin=stdin,
                                     policy=policy)


def _drop_none(d):
    return {k: v for k, v in d.items() if v is not None}


def _lang_name(lang):
    # llm-sandbox's SupportedLanguage members are str enums: their value is the name
    return getattr(lang, "value", lang)


def _strings(v, name):
    if v is None:
        return None
    if isinstance(v, str) or not all(isinstance(s, str) for s in v):
        raise TypeError(f"{name} must be a list of strings")
    return list(v)


def _wait(run_timeout):
    """How long to wait for an answer to a request that runs something."""
    return (run_timeout if run_timeout is not None else _UNBOUNDED_RUN_S) + _MARGIN_S


# ---------------------------------------------------------------------------------------------
# sessions

# llm-sandbox's keyword arguments that choose how its containers are made. The daemon makes the
# sandboxes, so these have no effect here, and ignoring them weakens nothing: accepted, unused.
_IGNORED = frozenset({
    "backend", "image", "dockerfile", "keep_template", "commit_container", "client", "stream",
    "skip_environment_setup", "kube_namespace", "container_configs",
})

# Ones whose silent omission would leave a user believing in protection or limits they do not have
# (or in access the sandbox does not give): refused, saying what llmbox does instead.
_REFUSED = {
    "security_policy": "llmbox enforces its own policies inside the daemon: pass policy=\"default\" or "
                       "\"strict\" (GET /v1/policies lists them); llm-sandbox's SecurityPolicy is not applied",
    "runtime_configs": "limits (memory, CPU, processes, user) come from the daemon's policy, not from the "
                       "client: ask its operator, or pick a stricter policy=",
    "container_id": "llmbox makes its own sandboxes; it cannot attach to an existing container",
    "mounts": "nothing from the host is mounted into an llmbox sandbox: copy files in with copy_to_runtime()",
    "pod_manifest": "the daemon makes the sandboxes; a pod manifest (and its securityContext) would not apply",
    "session_timeout": "the daemon closes a session after its idle timeout (LLMBOX_MCP_SESSION_IDLE), "
                       "not after a client-chosen lifetime: close the session yourself",
}


class SandboxSession:
    """A session on the daemon: one sandbox whose /sandbox persists across runs, commands and
    file copies (POST /v1/sessions), until close() (DELETE /v1/sessions/{id}).

        with SandboxSession(lang="python", policy="strict") as s:
            s.copy_to_runtime("data.csv", "/sandbox/data.csv")
            r = s.run("import csv; print(sum(1 for _ in open('data.csv')))")

    lang      a language the daemon knows (GET /v1/languages): python, shell, javascript, ...
    policy    an llmbox policy name the daemon lets this client pick; None: the daemon's default
              (or the token's)
    server    unix:/path, HOST:PORT or http://HOST:PORT; None: $LLMBOX_SERVER, else the default socket
    token     the bearer token for a daemon with tokens; None: $LLMBOX_TOKEN
    timeout   the default wall-clock timeout of each run and command, in seconds (None: the
              policy's); llm-sandbox's default_timeout and execution_timeout mean the same
    verbose   log each request on the "llmbox_client" logger (DEBUG)
    workdir   only "/sandbox", llmbox's workspace, is accepted
    enable_plotting   False drops captured plots from results (ArtifactSandboxSession's argument)

    llm-sandbox's other keyword arguments:

    - accepted and ignored, as they only choose how containers are made, which is the daemon's
      business here: backend, image, dockerfile, keep_template, commit_container, client, stream,
      skip_environment_setup, kube_namespace, container_configs;
    - refused with ValueError when given a value, because ignoring them would silently drop a
      protection, a limit or an access the caller expects: security_policy, runtime_configs,
      container_id, mounts, pod_manifest, session_timeout (the error says what to use instead);
    - anything else is a TypeError, as for any Python function.

    State persists in files under /sandbox, not in the interpreter: each run() is a new process
    (as in llm-sandbox).
    """

    def __init__(self, lang="python", policy=None, server=None, token=None, timeout=None, verbose=False,
                 workdir="/sandbox", enable_plotting=True, default_timeout=None, execution_timeout=None,
                 **compat):
        for name, value in compat.items():
            if name in _REFUSED:
                if value not in (None, {}, [], ()):
                    raise ValueError(f"llmbox_client: {name}= is not supported: {_REFUSED[name]}")
            elif name not in _IGNORED:
                raise TypeError(f"SandboxSession() got an unexpected keyword argument {name!r}")
        if workdir not in (None, "/sandbox", "/sandbox/"):
            raise ValueError(f"llmbox_client: workdir={workdir!r}: an llmbox sandbox's workspace is /sandbox")
        self.lang = _lang_name(lang)
        self.policy = policy
        self.timeout = next((t for t in (timeout, execution_timeout, default_timeout) if t is not None), None)
        self.verbose = verbose
        self.enable_plotting = enable_plotting
        self.client = Client(server, token, verbose)
        self.id = None
        self.is_open = False
        self.info = {}
        if verbose and not log.handlers:
            log.addHandler(logging.StreamHandler())
            log.setLevel(logging.DEBUG)

    @property
    def server(self):
        return self.client.server

    # lifetime

    def open(self):
        """Creates the daemon's session (POST /v1/sessions)."""
        if self.is_open:
            return self
        self.info = self.client.call("POST", "/v1/sessions", _drop_none({"lang": self.lang, "policy": self.policy}))
        self.id = self.info["id"]
        self.is_open = True
        log.debug("session %s open (%s, policy %s)", self.id, self.info.get("language"), self.info.get("policy"))
        return self

    def close(self):
        """Deletes the daemon's session (DELETE /v1/sessions/{id}); its sandbox and files go with
        it. A session the daemon already closed (idle, stopped) is closed without complaint."""
        if not self.is_open:
            return
        self.is_open = False
        try:
            self.client.call("DELETE", f"/v1/sessions/{self.id}")
        except LlmboxError as e:
            if e.status != 404:
                raise

    def __enter__(self):
        return self.open()

    def __exit__(self, exc_type, exc, tb):
        try:
            self.close()
        except LlmboxError:
            # an error already on its way out is the one the caller needs to see
            if exc_type is None:
                raise
        return None

    def _path(self, verb):
        if not self.is_open:
            raise LlmboxError(None, "not_open", "the session is not open: use `with SandboxSession(...) as s:` "
                              "or call open() first", self.server)
        return f"/v1/sessions/{self.id}/{verb}"

    # running

    def run(self, code, libraries=None, timeout=None, *, args=None, stdin=None):
        """Runs code in the session's sandbox (POST /v1/sessions/{id}/run) -> Result; libraries
        are installed first (the policy must allow installs)."""
        timeout = self.timeout if timeout is None else timeout
        doc = _drop_none({"code": code, "libraries": _strings(libraries, "libraries"), "timeout": timeout,
                          "args": _strings(args, "args"), "stdin": stdin})
        return Result(self.client.call("POST", self._path("run"), doc, timeout=_wait(timeout)),
                      plots=self.enable_plotting)

    def execute_command(self, command, workdir=None, *, stdin=None, timeout=None):
        """Runs a command in the sandbox (POST /v1/sessions/{id}/exec) -> Result. command: a shell
        string ("ls | wc -l") or an argv (["ls", "-la"]); workdir: where it runs (default
        /sandbox)."""
        if isinstance(command, (list, tuple)):
            command = _strings(command, "command")
            if workdir is not None:
                command = "exec " + " ".join(shlex.quote(a) for a in command)
        elif not isinstance(command, str):
            raise TypeError("command must be a shell string or a list of strings")
        if workdir is not None:
            command = f"cd -- {shlex.quote(workdir)} && {command}"
        timeout = self.timeout if timeout is None else timeout
        doc = _drop_none({"cmd": command, "stdin": stdin, "timeout": timeout})
        return Result(self.client.call("POST", self._path("exec"), doc, timeout=_wait(timeout)), plots=False)

    def execute_commands(self, commands, workdir=None):
        """Runs commands in order, each a command or a (command, workdir) pair; stops at the first
        that fails -> the last Result."""
        result = None
        for c in commands:
            if isinstance(c, tuple) and len(c) == 2:
                result = self.execute_command(c[0], workdir=c[1])
            else:
                result = self.execute_command(c, workdir=workdir)
            if result.exit_code != 0:
                break
        return result

    def install(self, libraries=None, timeout=None):
        """Installs libraries into the session (POST /v1/sessions/{id}/install) -> the install's
        Result (None when there is nothing to install). A policy without installs is an
        LlmboxError (422); an install that ran and failed is a Result whose exit_code says so."""
        if not libraries:
            return None
        doc = _drop_none({"libraries": _strings(libraries, "libraries"), "timeout": timeout})
        return Result(self.client.call("POST", self._path("install"), doc, timeout=_wait(timeout)), plots=False)

    # files

    def copy_to_runtime(self, src, dest):
        """Copies a local file, or a directory's tree, into the sandbox (PUT .../files?path=).

        dest is under /sandbox/ or relative to it; a dest ending in "/" means "into this
        directory". A directory goes file by file (at most the daemon's body limit, 16 MiB, each);
        its empty directories are made with mkdir; symbolic links and special files in it are
        skipped with a warning (the daemon refuses links too). Returns the sandbox paths written
        (absolute, as the daemon names them).
        """
        if dest.endswith("/"):
            dest = posixpath.join(dest, os.path.basename(os.path.normpath(src)))
        st = os.stat(src)
        if stat.S_ISREG(st.st_mode):
            return [self._put(src, dest)]
        if not stat.S_ISDIR(st.st_mode):
            raise ValueError(f"copy_to_runtime: {src} is neither a file nor a directory")
        written, empty = [], []
        for top, dirs, files in os.walk(src):
            dirs.sort()
            rel = os.path.relpath(top, src)
            base = dest if rel == "." else posixpath.join(dest, *rel.split(os.sep))
            for name in list(dirs):
                if os.path.islink(os.path.join(top, name)):
                    warnings.warn(f"copy_to_runtime: skipped the symbolic link {os.path.join(top, name)}",
                                  stacklevel=2)
                    dirs.remove(name)
            here = 0
            for name in sorted(files):
                local = os.path.join(top, name)
                if not stat.S_ISREG(os.lstat(local).st_mode):
                    warnings.warn(f"copy_to_runtime: skipped {local} (not a regular file)", stacklevel=2)
                    continue
                written.append(self._put(local, posixpath.join(base, name)))
                here += 1
            if not dirs and not here:
                empty.append(base)  # (a PUT makes a file's directories; these have no file)
        if empty:
            r = self.execute_command(["mkdir", "-p", "--"] + empty)
            if r.exit_code != 0:
                raise LlmboxError(None, "mkdir_failed", f"cannot make {', '.join(empty)} in the sandbox: "
                                  f"{r.stderr.strip()}", self.server)
        return written

    def _put(self, local, dest):
        # O_NOFOLLOW: the file named is the file sent, not where a link swapped in since points
        fd = os.open(local, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            _, _, answer = self.client.request("PUT", self._path("files"), f, query={"path": dest},
                                               headers={"Content-Length": str(size)})
        return json.loads(answer)["path"]

    def copy_from_runtime(self, src, dest):
        """Copies a file or a directory out of the sandbox (GET .../files?path=).

        A file is written to dest (into it, under src's name, when dest is a directory). A
        directory arrives as a tar and is unpacked into dest (made if missing): only regular files
        and directories are unpacked, and an archive with a member outside dest, a link or a
        device is refused whole (LlmboxError "unsafe_archive") before anything is written. Returns
        the local paths written.
        """
        _, headers, data = self.client.request("GET", self._path("files"), query={"path": src},
                                               timeout=_QUICK_S)
        if (headers.get("Content-Type") or "").startswith("application/x-tar"):
            return extract_tar(data, dest, self.server)
        if os.path.isdir(dest):
            dest = os.path.join(dest, posixpath.basename(src.rstrip("/")))
        with open(dest, "wb") as f:
            f.write(data)
        return [dest]


# ArtifactSandboxSession captures plots in llm-sandbox; every llmbox session does
ArtifactSandboxSession = SandboxSession


# ---------------------------------------------------------------------------------------------
# unpacking a directory safely


def extract_tar(data, dest, server=None):
    """Unpacks a tar (bytes) into the directory dest -> the files written.

    Every member is checked before anything is written: absolute names, ".." components, links
    (symbolic or hard), devices and FIFOs refuse the whole archive. Files are created with
    O_NOFOLLOW under a parent whose real path is checked to be inside dest, so a link already in
    dest cannot redirect a write outside it; modes keep at most rwxr-xr-x (no setuid, no
    group- or world-writable files)."""
    def unsafe(msg):
        return LlmboxError(None, "unsafe_archive", f"refused the archive from {server or 'the server'}: {msg}",
                           server)

    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    plan = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for m in tf.getmembers():
            if m.name.startswith("/"):
                raise unsafe(f"member {m.name!r} has an absolute name")
            parts = [p for p in m.name.split("/") if p not in ("", ".")]
            if ".." in parts:
                raise unsafe(f"member {m.name!r} leaves the directory")
            if not (m.isfile() or m.isdir()):
                raise unsafe(f"member {m.name!r} is a link or a special file")
            plan.append((m, os.path.join(root, *parts) if parts else root))
        written = []
        for m, target in plan:
            if m.isdir():
                os.makedirs(target, exist_ok=True)
                if os.path.realpath(target) != target:
                    raise unsafe(f"{target} is reached through a symbolic link")
                continue
            parent = os.path.dirname(target)
            os.makedirs(parent, exist_ok=True)
            if os.path.realpath(parent) != parent:
                raise unsafe(f"{parent} is reached through a symbolic link")
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                src = tf.extractfile(m)
                while True:
                    chunk = src.read(1 << 16)
                    if not chunk:
                        break
                    f.write(chunk)
                os.fchmod(f.fileno(), (m.mode & 0o755) | 0o600)
            written.append(target)
    return written
