#!/usr/bin/python3
"""A Python image for the container backends' specs, made from this host's own files: there is
no registry here, and a debootstrap'd matplotlib drags in 800 MB of Debian dependencies (scipy,
pythran, g++). It holds what a run of the python recipe touches: CPython and its standard
library, numpy, matplotlib and Pillow, the shared libraries those loaded (read from
/proc/self/maps after a plot was drawn), the fonts matplotlib uses, Debian's
command-line tools (dash as /bin/sh, coreutils, util-linux...) and a static busybox for
whatever they lack.

    python_image.py OUT.tar    writes the image's root as a tar (for POST /images/create)
"""
import os
import re
import subprocess
import sys
import tarfile
import tempfile

PACKAGES = ["numpy", "matplotlib", "PIL", "cycler", "kiwisolver", "pyparsing", "dateutil", "six",
            "packaging", "fontTools", "mpl_toolkits", "contourpy"]
TOOL_PACKAGES = ["coreutils", "findutils", "grep", "sed", "util-linux", "procps", "tar", "gzip", "dash"]
SKIP_DIRS = {"test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "__pycache__",
             "config-3.11-x86_64-linux-gnu"}


def workload():
    """Draws a plot the way the recipe's backend does, so every library it needs gets loaded."""
    os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import json, hashlib, ssl, sqlite3, decimal, ctypes, zlib, bz2, lzma, csv, uuid  # noqa: F401,E401
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 4, 9], label="x")
    ax.legend()
    ax.set_title("t")
    fig.savefig(os.path.join(os.environ["MPLCONFIGDIR"], "a.png"))
    fig.savefig(os.path.join(os.environ["MPLCONFIGDIR"], "a.svg"))
    maps = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                maps.add(parts[5].strip())
    return sorted(p for p in maps if os.path.exists(p))


def needed(objects):
    """The libraries the loader finds for these objects, by the names it looks them up under
    (symlinks through /etc/alternatives included), as ldd reports them."""
    out = set()
    for i in range(0, len(objects), 200):
        res = subprocess.run(["ldd"] + objects[i:i + 200], capture_output=True, text=True)
        for m in re.finditer(r"=> (/\S+) \(", res.stdout):
            out.add(m.group(1))
    return sorted(out)


class Image:
    def __init__(self, out):
        self.tar = tarfile.open(out, "w")
        self.done = set()

    def add_path(self, path):
        """Adds path, every symlink on the way to it (merged /usr: /lib64 -> usr/lib64) and what
        the last one points to."""
        path = os.path.normpath(path)
        if path in self.done or path == "/" or not os.path.lexists(path):  # (a dangling link's target)
            return
        parent = os.path.dirname(path)
        self.add_path(parent)
        real_parent = os.path.realpath(parent)
        here = os.path.join(real_parent, os.path.basename(path))
        if here != path:  # a symlink above: the entry lives below its target
            self.done.add(path)
            self.add_path(here)
            return
        self.done.add(path)
        info = self.tar.gettarinfo(path, arcname=path.lstrip("/"))
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if info.isreg():
            with open(path, "rb") as f:
                self.tar.addfile(info, f)
        else:
            self.tar.addfile(info)
        if os.path.islink(path):
            self.add_path(os.path.join(parent, os.readlink(path)))

    def add_tree(self, top):
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            self.add_path(root)
            for name in files:
                if not name.endswith(".pyc"):
                    self.add_path(os.path.join(root, name))
            for d in dirs:
                if os.path.islink(os.path.join(root, d)):
                    self.add_path(os.path.join(root, d))

    def add_data(self, name, data, mode=0o644):
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), mode
        import io
        self.tar.addfile(info, io.BytesIO(data))

    def add_dir(self, name, mode=0o755):
        info = tarfile.TarInfo(name)
        info.type, info.mode = tarfile.DIRTYPE, mode
        self.tar.addfile(info)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python_image.py OUT.tar")
    mapped = workload()
    img = Image(sys.argv[1])
    for d in ("tmp", "etc", "bin", "usr/local", "usr/local/bin"):  # no /sandbox: the engines copy its mode onto the tmpfs
        img.add_dir(d, 0o1777 if d == "tmp" else 0o755)
    img.done.update({"/tmp", "/etc", "/bin", "/usr/local", "/usr/local/bin"})
    img.add_data("bin/busybox", open("/bin/busybox", "rb").read(), 0o755)
    # every applet busybox has: the specs' shell snippets use seq, find, mkfifo, setsid...
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    for a in applets:
        # /bin/sh is dash, as in Debian's images (busybox's sh prefers its own applets)
        if a in ("busybox", "sh"):
            continue
        info = tarfile.TarInfo("bin/" + a)
        info.type, info.linkname = tarfile.SYMTYPE, "busybox"
        img.tar.addfile(info)
    info = tarfile.TarInfo("bin/sh")
    info.type, info.linkname = tarfile.SYMTYPE, "/usr/bin/dash"
    img.tar.addfile(info)
    img.add_data("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/sandbox:/bin/sh\n")
    img.add_data("etc/group", b"root:x:0:\nsandbox:x:1000:\n")
    # the dynamic loader under the name the binaries ask for, besides the one it was mapped as
    for p in ["/usr/bin/python3", sys.executable, "/lib64/ld-linux-x86-64.so.2"] + mapped:
        img.add_path(p)
    stdlib = os.path.dirname(os.__file__)
    img.add_tree(stdlib)
    for pkg in PACKAGES:
        try:
            mod = __import__(pkg)
        except ImportError:
            continue
        if os.path.basename(mod.__file__) == "__init__.py":
            img.add_tree(os.path.dirname(mod.__file__))
        else:  # a single-file module (six.py)
            img.add_path(mod.__file__)
    # Debian's own command-line tools, as an official Debian-based image has them (GNU
    # messages, setsid -f, ipcs): before busybox's on the PATH
    tools = subprocess.run(["dpkg", "-L"] + TOOL_PACKAGES, capture_output=True, text=True).stdout.split("\n")
    for t in tools:
        if re.match(r"^/(usr/)?s?bin/[^/]+$", t) and os.path.isfile(t) and not os.path.islink(t):
            img.add_path(t)
    objects = sorted(p for p in img.done if p.endswith(".so") or ".so." in os.path.basename(p)
                     or p.startswith("/usr/bin/") or p.startswith("/usr/sbin/"))
    for p in needed([o for o in objects if os.path.isfile(o) and not os.path.islink(o)]):
        img.add_path(p)
    for extra in ("/etc/matplotlibrc", "/etc/fonts", "/usr/share/matplotlib"):
        if os.path.isdir(extra):
            img.add_tree(extra)
        elif os.path.exists(extra):
            img.add_path(extra)
    img.tar.close()


if __name__ == "__main__":
    main()
