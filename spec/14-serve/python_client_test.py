"""Tests of examples/python/llmbox_client.py against a real `llmbox serve` (no mocks).

Run by spec/14-serve/python_client_spec.lua, which starts the daemons and passes them here:

    LLMBOX_TEST_SERVER=unix:/path        a daemon without tokens (LLMBOX_MCP_POLICIES=strict)
    LLMBOX_TEST_TCP=127.0.0.1:PORT       a daemon with tokens, listening on TCP
    LLMBOX_TEST_TOKEN=...                a token the TCP daemon knows

    python3 -B python_client_test.py [TestCase ...]    (--list prints the TestCase names)

A missing variable fails the tests that need it: nothing is skipped.
"""

import importlib.util
import io
import os
import sys
import tarfile
import tempfile
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "..", "..", "examples", "python", "llmbox_client.py")

_spec = importlib.util.spec_from_file_location("llmbox_client", CLIENT)
lc = importlib.util.module_from_spec(_spec)
sys.modules["llmbox_client"] = lc
_spec.loader.exec_module(lc)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def env(name):
    value = os.environ.get(name)
    if not value:
        raise AssertionError(f"${name} is not set: run this from spec/14-serve/python_client_spec.lua")
    return value


def setUpModule():
    # the tests say which server and token they use; the caller's environment plays no part
    for name in ("LLMBOX_SERVER", "LLMBOX_TOKEN", "LLMBOX_TEST_ENV_SERVER"):
        os.environ.pop(name, None)


def tree(root):
    """{relative path: bytes or None for a directory} under root"""
    out = {}
    for top, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(top, d), root)] = None
        for f in files:
            with open(os.path.join(top, f), "rb") as fh:
                out[os.path.relpath(os.path.join(top, f), root)] = fh.read()
    return out


class Addresses(unittest.TestCase):
    """Where the daemon is: addresses and the default socket (no daemon needed)."""

    def test_parse(self):
        self.assertEqual(("unix", "/run/x.sock"), lc.parse_server("unix:/run/x.sock"))
        self.assertEqual(("tcp", ("127.0.0.1", 8080)), lc.parse_server("127.0.0.1:8080"))
        self.assertEqual(("tcp", ("box.example", 80)), lc.parse_server("http://box.example:80/"))
        self.assertEqual(("tcp", ("::1", 9)), lc.parse_server("[::1]:9"))
        for bad in ("unix:rel.sock", "https://h:1", "h", "h:port", "http://h:1/v1", ""):
            with self.assertRaises(ValueError, msg=bad):
                lc.parse_server(bad)

    def test_default_socket(self):
        self.assertEqual("unix:/run/llmbox/llmbox.sock", lc.default_server({}, 0))
        self.assertEqual("unix:/run/user/7/llmbox.sock", lc.default_server({"XDG_RUNTIME_DIR": "/run/user/7"}, 7))
        self.assertIsNone(lc.default_server({}, 7))


class OneShot(unittest.TestCase):
    """The module-level run(): POST /v1/run."""

    def test_run(self):
        r = lc.run("import sys; print(6*7, sys.argv[1:], input())", args=["a"], stdin="in",
                   server=env("LLMBOX_TEST_SERVER"))
        self.assertIsInstance(r, lc.ConsoleOutput)
        self.assertIs(lc.ExecutionResult, lc.Result)
        self.assertEqual("42 ['a'] in\n", r.stdout)
        self.assertEqual(0, r.exit_code)
        self.assertTrue(r.success())
        self.assertFalse(r.timed_out)
        self.assertIsNone(r.limit)
        self.assertIsInstance(r.duration_ms, (int, float))
        self.assertEqual("42 ['a'] in\n", r.raw["stdout"])
        r = lc.run("echo hi >&2; exit 3", lang="shell", server=env("LLMBOX_TEST_SERVER"))
        self.assertEqual(("", "hi\n", 3), (r.stdout, r.stderr, r.exit_code))
        self.assertFalse(r.success())

    def test_server_from_the_environment(self):
        os.environ["LLMBOX_SERVER"] = env("LLMBOX_TEST_SERVER")
        try:
            self.assertEqual("1\n", lc.run("print(1)").stdout)
        finally:
            del os.environ["LLMBOX_SERVER"]

    def test_timeout_is_a_result(self):
        r = lc.run("import time; time.sleep(30)", timeout=0.5, server=env("LLMBOX_TEST_SERVER"))
        self.assertTrue(r.timed_out)
        self.assertEqual("timeout", r.limit)
        self.assertNotEqual(0, r.exit_code)
        self.assertFalse(r.success())
        self.assertLess(r.duration_ms, 10000)

    def test_daemon_errors(self):
        with self.assertRaises(lc.LlmboxError) as cm:
            lc.run("print(1)", lang="cobol", server=env("LLMBOX_TEST_SERVER"))
        e = cm.exception
        self.assertEqual((400, "bad_request"), (e.status, e.code))
        self.assertIn('unknown language "cobol"', e.message)
        self.assertIn("HTTP 400 bad_request from unix:", str(e))
        # code the policy refuses: 422 with the violations
        with self.assertRaises(lc.SandboxException) as cm:
            lc.run("import subprocess", policy="strict", server=env("LLMBOX_TEST_SERVER"))
        self.assertEqual((422, "refused"), (cm.exception.status, cm.exception.code))
        self.assertEqual("module:subprocess", cm.exception.violations[0]["rule"])
        # a policy this client may not pick
        with self.assertRaises(lc.LlmboxError) as cm:
            lc.run("print(1)", policy="permissive", server=env("LLMBOX_TEST_SERVER"))
        self.assertEqual((403, "policy_not_allowed"), (cm.exception.status, cm.exception.code))

    def test_no_server(self):
        missing = "unix:" + tempfile.mkdtemp() + "/none.sock"
        with self.assertRaises(lc.LlmboxError) as cm:
            lc.run("print(1)", server=missing)
        e = cm.exception
        self.assertIsNone(e.status)
        self.assertEqual("unreachable", e.code)
        self.assertIn("cannot reach the llmbox server at " + missing, e.message)
        self.assertIn("llmbox serve --listen " + missing, e.message)


class Sessions(unittest.TestCase):
    """SandboxSession: its lifetime, runs, commands, plots and installs."""

    def test_state_persists_in_files(self):
        with lc.SandboxSession(lang="python", server=env("LLMBOX_TEST_SERVER")) as s:
            self.assertTrue(s.is_open)
            self.assertEqual("python", s.info["language"])
            self.assertEqual("default", s.info["policy"])
            r = s.run("open('state.txt', 'w').write('kept')\nx = 1")
            self.assertEqual(0, r.exit_code, r.stderr)
            r = s.run("print(open('state.txt').read())")
            self.assertEqual("kept\n", r.stdout)
            # a new process each run (as in llm-sandbox): variables do not persist, files do
            r = s.run("print(x)")
            self.assertIn("NameError", r.stderr)

    def test_execute_command(self):
        with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER")) as s:
            s.run("open('a.txt', 'w').write('hello')")
            r = s.execute_command(["cat", "a.txt"])
            self.assertEqual(("hello", 0), (r.stdout, r.exit_code))
            r = s.execute_command("ls | wc -l")
            self.assertEqual("1\n", r.stdout)
            r = s.execute_command("mkdir -p d/e && pwd", workdir="/sandbox")
            self.assertEqual("/sandbox\n", r.stdout)
            r = s.execute_command(["pwd"], workdir="/sandbox/d/e")
            self.assertEqual("/sandbox/d/e\n", r.stdout)
            r = s.execute_command("exit 4")
            self.assertEqual(4, r.exit_code)
            r = s.execute_commands(["true", ("pwd", "/sandbox/d"), "false", "echo never"])
            self.assertEqual(1, r.exit_code)
            r = s.execute_command("sleep 30", timeout=0.5)
            self.assertEqual("timeout", r.limit)

    def test_plot_comes_back_as_png(self):
        with lc.ArtifactSandboxSession(lang="python", server=env("LLMBOX_TEST_SERVER")) as s:
            r = s.run("import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\n"
                      "plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
            self.assertEqual(0, r.exit_code, r.stderr)
            self.assertEqual(1, len(r.plots))
            p = r.plots[0]
            self.assertEqual("png", p.format)
            self.assertEqual("png", p.format.value)
            self.assertEqual(PNG_MAGIC, p.data[:8])
            self.assertEqual((400, 300), (p.width, p.height))
            # the bytes say the same: the PNG header's width and height
            self.assertEqual((400, 300), (int.from_bytes(p.data[16:20], "big"), int.from_bytes(p.data[20:24], "big")))
        with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER"), enable_plotting=False) as s:
            r = s.run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
            self.assertEqual([], r.plots)

    def test_install_refused_by_policy(self):
        with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER")) as s:
            self.assertIsNone(s.install([]))
            with self.assertRaises(lc.LlmboxError) as cm:
                s.install(["requests"])
            self.assertEqual(422, cm.exception.status)
            self.assertIn("does not allow library installs", cm.exception.message)

    def test_context_manager_deletes_the_session(self):
        with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER")) as s:
            sid = s.id
            self.assertEqual("1\n", s.run("print(1)").stdout)
        self.assertFalse(s.is_open)
        # the daemon no longer knows it
        client = lc.Client(env("LLMBOX_TEST_SERVER"))
        with self.assertRaises(lc.LlmboxError) as cm:
            client.call("POST", f"/v1/sessions/{sid}/run", {"code": "print(1)"})
        self.assertEqual((404, "no_session"), (cm.exception.status, cm.exception.code))
        # and the closed session says so without asking
        with self.assertRaises(lc.LlmboxError) as cm:
            s.run("print(1)")
        self.assertEqual("not_open", cm.exception.code)
        s.close()  # twice is fine
        # an exception inside the block is the one that comes out, and the session is still deleted
        with self.assertRaises(ZeroDivisionError):
            with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER")) as s2:
                sid = s2.id
                1 / 0
        with self.assertRaises(lc.LlmboxError) as cm:
            client.call("DELETE", f"/v1/sessions/{sid}")
        self.assertEqual(404, cm.exception.status)

    def test_session_errors(self):
        with self.assertRaises(lc.LlmboxError) as cm:
            lc.SandboxSession(lang="cobol", server=env("LLMBOX_TEST_SERVER")).open()
        self.assertEqual(400, cm.exception.status)
        # a session on the strict policy refuses what strict refuses
        with lc.SandboxSession(policy="strict", server=env("LLMBOX_TEST_SERVER")) as s:
            self.assertEqual("strict", s.info["policy"])
            with self.assertRaises(lc.LlmboxError) as cm:
                s.run("import subprocess")
            self.assertEqual((422, "refused"), (cm.exception.status, cm.exception.code))

    def test_llm_sandbox_keyword_arguments(self):
        server = env("LLMBOX_TEST_SERVER")
        # the ones that only choose containers: accepted, no effect
        s = lc.SandboxSession(lang="python", image="ghcr.io/x/y", keep_template=True, commit_container=False,
                              backend="docker", verbose=False, workdir="/sandbox", server=server,
                              default_timeout=7, security_policy=None, runtime_configs={})
        self.assertEqual(7, s.timeout)
        # the ones whose omission would loosen what the caller expects: refused, saying why
        for kw, hint in (("security_policy", "policy="), ("runtime_configs", "policy"),
                         ("container_id", "existing container"), ("mounts", "copy_to_runtime"),
                         ("session_timeout", "idle")):
            with self.assertRaises(ValueError, msg=kw) as cm:
                lc.SandboxSession(server=server, **{kw: {"mem_limit": "1g"} if kw == "runtime_configs" else "x"})
            self.assertIn(hint, str(cm.exception))
        with self.assertRaises(ValueError):
            lc.SandboxSession(server=server, workdir="/workspace")
        with self.assertRaises(TypeError):
            lc.SandboxSession(server=server, no_such_argument=1)


class Files(unittest.TestCase):
    """copy_to_runtime and copy_from_runtime: files and directories, both ways."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def test_file_round_trip(self):
        src = os.path.join(self.tmp, "in.bin")
        data = bytes(range(256)) * 64
        with open(src, "wb") as f:
            f.write(data)
        with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER")) as s:
            self.assertEqual(["/sandbox/in dir/a+b.bin"], s.copy_to_runtime(src, "/sandbox/in dir/a+b.bin"))
            self.assertEqual(["/sandbox/data/in.bin"], s.copy_to_runtime(src, "data/"))
            r = s.run("print(len(open('in dir/a+b.bin', 'rb').read()), "
                      "open('data/in.bin', 'rb').read() == open('/sandbox/in dir/a+b.bin', 'rb').read())")
            self.assertEqual(f"{len(data)} True\n", r.stdout)
            out = os.path.join(self.tmp, "out.bin")
            self.assertEqual([out], s.copy_from_runtime("in dir/a+b.bin", out))
            with open(out, "rb") as f:
                self.assertEqual(data, f.read())
            # into a directory: under the file's name
            self.assertEqual([os.path.join(self.tmp, "a+b.bin")],
                             s.copy_from_runtime("/sandbox/in dir/a+b.bin", self.tmp))
            with self.assertRaises(lc.LlmboxError) as cm:
                s.copy_from_runtime("nope.txt", out)
            self.assertEqual((404, "not_found"), (cm.exception.status, cm.exception.code))
            with self.assertRaises(lc.LlmboxError) as cm:
                s.copy_from_runtime("../etc/passwd", out)
            self.assertEqual(400, cm.exception.status)

    def test_directory_round_trip(self):
        src = os.path.join(self.tmp, "src")
        os.makedirs(os.path.join(src, "sub", "deep"))
        os.makedirs(os.path.join(src, "empty"))
        files = {"top.txt": b"top\n", "odd name+%.txt": b"odd", os.path.join("sub", "deep", "bin"): b"\0\1\2\xff"}
        for rel, data in files.items():
            with open(os.path.join(src, rel), "wb") as f:
                f.write(data)
        os.symlink("/etc/passwd", os.path.join(src, "link"))
        with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER")) as s:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                written = s.copy_to_runtime(src, "/sandbox/proj")
            self.assertEqual(3, len(written))
            self.assertIn("skipped", str(caught[0].message))
            self.assertIn("link", str(caught[0].message))
            r = s.execute_command("find proj | sort")
            self.assertEqual("proj\nproj/empty\nproj/odd name+%.txt\nproj/sub\nproj/sub/deep\nproj/sub/deep/bin\n"
                             "proj/top.txt\n", r.stdout)
            s.run("open('proj/made-inside.txt', 'w').write('new')")
            out = os.path.join(self.tmp, "back")
            s.copy_from_runtime("proj", out)
        want = {rel: data for rel, data in files.items()}
        want.update({"sub": None, os.path.join("sub", "deep"): None, "empty": None, "made-inside.txt": b"new"})
        self.assertEqual(want, tree(out))

    def test_body_too_large(self):
        big = os.path.join(self.tmp, "big")
        with open(big, "wb") as f:
            f.truncate(17 * 1024 * 1024)
        with lc.SandboxSession(server=env("LLMBOX_TEST_SERVER")) as s:
            with self.assertRaises(lc.LlmboxError) as cm:
                s.copy_to_runtime(big, "big")
            self.assertEqual((413, "body_too_large"), (cm.exception.status, cm.exception.code))

    def test_unsafe_archives_are_refused_whole(self):
        def archive(*members):
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tf:
                ok = tarfile.TarInfo("./ok.txt")
                ok.size = 2
                tf.addfile(ok, io.BytesIO(b"ok"))
                for m in members:
                    tf.addfile(m, io.BytesIO(b"x" * m.size) if m.isfile() else None)
            return buf.getvalue()

        def member(name, kind=tarfile.REGTYPE, size=1, link=""):
            m = tarfile.TarInfo(name)
            m.type, m.size, m.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
            return m

        outside = os.path.join(self.tmp, "escaped")
        cases = [
            (member("../escaped"), "leaves the directory"),
            (member("a/../../escaped"), "leaves the directory"),
            (member(outside), "absolute name"),
            (member("l", tarfile.SYMTYPE, link="/etc"), "link or a special file"),
            (member("h", tarfile.LNKTYPE, link="/etc/passwd"), "link or a special file"),
            (member("dev", tarfile.CHRTYPE), "link or a special file"),
            (member("fifo", tarfile.FIFOTYPE), "link or a special file"),
        ]
        for m, why in cases:
            dest = tempfile.mkdtemp(dir=self.tmp)
            with self.assertRaises(lc.LlmboxError, msg=m.name) as cm:
                lc.extract_tar(archive(m), dest)
            self.assertEqual("unsafe_archive", cm.exception.code)
            self.assertIn(why, cm.exception.message)
            self.assertEqual([], os.listdir(dest), "nothing is written from a refused archive")
            self.assertFalse(os.path.exists(outside))
        # a link already in dest does not redirect a write outside it
        dest = tempfile.mkdtemp(dir=self.tmp)
        os.symlink(self.tmp, os.path.join(dest, "sub"))
        with self.assertRaises(lc.LlmboxError):
            lc.extract_tar(archive(member("sub/planted.txt")), dest)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "planted.txt")))
        # the control: a plain archive unpacks, modes kept to rwxr-xr-x
        dest = tempfile.mkdtemp(dir=self.tmp)
        m = member("bin/tool")
        m.mode = 0o4777
        lc.extract_tar(archive(m), dest)
        self.assertEqual({"ok.txt": b"ok", "bin": None, os.path.join("bin", "tool"): b"x"}, tree(dest))
        self.assertEqual(0o755, os.stat(os.path.join(dest, "bin", "tool")).st_mode & 0o7777)


class TcpTokens(unittest.TestCase):
    """A daemon on TCP with bearer tokens."""

    def test_token_argument_and_environment(self):
        tcp, token = env("LLMBOX_TEST_TCP"), env("LLMBOX_TEST_TOKEN")
        self.assertEqual("7\n", lc.run("print(7)", server=tcp, token=token).stdout)
        with lc.SandboxSession(server="http://" + tcp, token=token) as s:
            s.copy_to_runtime(os.path.abspath(__file__), "t.py")
            self.assertEqual("0\n", s.execute_command("test -s t.py; echo $?").stdout)
        os.environ.update(LLMBOX_SERVER="http://" + tcp, LLMBOX_TOKEN=token)
        try:
            self.assertEqual("8\n", lc.run("print(8)").stdout)
        finally:
            del os.environ["LLMBOX_SERVER"], os.environ["LLMBOX_TOKEN"]

    def test_wrong_or_missing_token(self):
        tcp, token = env("LLMBOX_TEST_TCP"), env("LLMBOX_TEST_TOKEN")
        for bad in (token + "x", "x" * 32, None):
            with self.assertRaises(lc.LlmboxError, msg=repr(bad)) as cm:
                lc.run("print(1)", server=tcp, token=bad)
            self.assertEqual((401, "unauthorized"), (cm.exception.status, cm.exception.code))
            self.assertIn("Authorization: Bearer", cm.exception.message)
        with self.assertRaises(lc.LlmboxError) as cm:
            lc.SandboxSession(server=tcp, token="wrong-token-wrong-token").open()
        self.assertEqual(401, cm.exception.status)

    def test_body_too_large_over_tcp(self):
        tcp, token = env("LLMBOX_TEST_TCP"), env("LLMBOX_TEST_TOKEN")
        big = os.path.join(tempfile.mkdtemp(), "big")
        with open(big, "wb") as f:
            f.truncate(17 * 1024 * 1024)
        with lc.SandboxSession(server=tcp, token=token) as s:
            with self.assertRaises(lc.LlmboxError) as cm:
                s.copy_to_runtime(big, "big")
            self.assertEqual(413, cm.exception.status)


def test_case_names():
    return sorted(n for n, v in globals().items() if isinstance(v, type) and issubclass(v, unittest.TestCase))


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print("\n".join(test_case_names()))
        sys.exit(0)
    unittest.main(verbosity=2)
