#!/usr/bin/python3
"""An image with every toolchain the language recipes drive, for the conformance suite on the
container backends, made from this host's own Debian packages (there is no registry here): the
files of the packages `make test` installs for the languages (DEPS_LANGS, `make
print-deps-langs`) and of everything they depend on, as dpkg lists them, with the
update-alternatives links that point into them (java, javac, c++...), the loader's cache, and a
static busybox for the tools the specs' shell snippets use. Documentation, manuals and
translations are left out. About 1.5 GB.

    langs_image.py OUT.tar PACKAGE...    writes the image's root as a tar (POST /images/create)
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_image import Image  # noqa: E402

# What every image of Debian's has besides the toolchains (Essential packages, which no package
# declares a dependency on: R's start script wants bash, its runs C.UTF-8 from libc-bin): shells,
# core tools.
BASE = ["dash", "bash", "debianutils", "libc-bin", "coreutils", "util-linux", "findutils", "grep", "sed", "tar", "gzip", "procps"]
SKIP = re.compile(r"^/usr/share/(doc|man|info|locale|lintian|bug|menu)(/|$)")


def closure(packages):
    """The installed packages these depend on, recursively (Depends and Pre-Depends; for an
    alternative, the first one installed)."""
    seen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        r = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status}\t${Depends}, ${Pre-Depends}", p],
                           capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.startswith("installed"):
            continue
        seen.add(p)
        for dep in r.stdout.split("\t", 1)[1].split(","):
            for alt in dep.split("|"):
                m = re.match(r"\s*([a-z0-9][a-z0-9.+-]*)", alt)
                if not m:
                    continue
                name = m.group(1)
                if subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status}", name],
                                  capture_output=True, text=True).stdout == "installed":
                    todo.append(name)
                    break
    return sorted(seen)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: langs_image.py OUT.tar PACKAGE...")
    pkgs = closure(sys.argv[2:] + BASE)
    listed = subprocess.run(["dpkg", "-L"] + pkgs, capture_output=True, text=True).stdout.split("\n")
    img = Image(sys.argv[1])
    import tarfile
    for d in ("tmp", "etc", "usr", "usr/local", "usr/local/bin"):
        img.add_dir(d, 0o1777 if d == "tmp" else 0o755)
    # merged /usr, as Debian 12's images have it: what dpkg lists under /bin lands in /usr/bin
    for link in ("bin", "sbin", "lib", "lib64"):
        info = tarfile.TarInfo(link)
        info.type, info.linkname = tarfile.SYMTYPE, "usr/" + link
        img.tar.addfile(info)
    img.done.update({"/tmp", "/etc", "/usr", "/usr/local", "/usr/local/bin", "/bin", "/sbin", "/lib", "/lib64"})
    img.add_data("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/sandbox:/bin/sh\n")
    img.add_data("etc/group", b"root:x:0:\nsandbox:x:1000:\n")
    img.done.update({"/etc/passwd", "/etc/group"})
    files = set()
    for path in listed:
        if not path.startswith("/") or SKIP.match(path) or path in ("/", "/.") or path.startswith("/etc/passwd"):
            continue
        if os.path.lexists(path) and not os.path.isdir(path) or os.path.islink(path):
            files.add(path)
    for path in sorted(files):
        img.add_path(path)
    # update-alternatives' links (not in any package's list) that lead into what is there
    for d in ("/usr/bin", "/usr/sbin", "/etc/alternatives", "/usr/lib/x86_64-linux-gnu"):
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if os.path.islink(p) and os.path.realpath(p) in files | img.done and p not in img.done:
                img.add_path(p)
    for extra in ("/etc/ld.so.cache", "/lib64/ld-linux-x86-64.so.2", "/usr/bin/sh"):
        img.add_path(extra)
    # busybox for the specs' snippets' tools Debian's base lacks (mkfifo is coreutils', but
    # seq, setsid, ipcs... come from several packages); Debian's own tools come first on PATH
    img.add_data("usr/local/bin/busybox", open("/bin/busybox", "rb").read(), 0o755)
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    for a in applets:
        if a in ("busybox", "sh") or os.path.exists("/usr/bin/" + a) and "/usr/bin/" + a in img.done:
            continue
        info = tarfile.TarInfo("usr/local/bin/" + a)
        info.type, info.linkname = tarfile.SYMTYPE, "busybox"
        img.tar.addfile(info)
    img.tar.close()


if __name__ == "__main__":
    main()
