-- Images without a daemon from archives (issue 16): docker save's format, an OCI layout and an
-- archive of one, unpacked by llmbox into a content-addressed cache and run on native; and the
-- layer unpacker (runtime/layer.c) against hostile archives, which are untrusted input.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"
local json = require "llmbox.json"
local core = require "llmbox.core"
local unpack = require "llmbox.backends.unpack"

local q = helpers.shell_quote

-- A tar made by Python's tarfile from { {name, type, data, mode, target}, ... }.
local TAR_PY = [[
import io, json, sys, tarfile
types = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
         "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}
entries = json.load(open(sys.argv[1]))
with tarfile.open(sys.argv[2], "w", format=tarfile.GNU_FORMAT) as t:
    for e in entries:
        info = tarfile.TarInfo(e["name"])
        info.type = types[e.get("type", "file")]
        info.mode = e.get("mode", 0o644)
        info.linkname = e.get("target", "")
        data = e.get("data", "").encode()
        info.size = len(data) if info.type == tarfile.REGTYPE else 0
        t.addfile(info, io.BytesIO(data) if info.size else None)
]]

local function make_tar(entries, cut)
    local dir = helpers.tmpdir()
    helpers.write(dir .. "/make.py", TAR_PY)
    helpers.write(dir .. "/entries.json", json.encode(entries))
    local out = dir .. "/layer.tar"
    assert(os.execute(("/usr/bin/python3 %s %s %s"):format(q(dir .. "/make.py"), q(dir .. "/entries.json"), q(out))) == 0)
    if cut then
        local data = helpers.read(out)
        helpers.write(out, data:sub(1, cut))
    end
    return out
end

local function listing(dir)
    local p = io.popen("cd " .. q(dir) .. " && find . -printf '%y %m %p\\n' | sort")
    local text = p:read("*a")
    p:close()
    return text
end

describe("image layers, unpacked from untrusted archives #unpriv", function()
    local root, outside
    before_each(function()
        local base = helpers.tmpdir()
        root, outside = base .. "/root", base .. "/outside"
        os.execute("mkdir " .. q(root) .. " " .. q(outside))
    end)

    it("refuse an entry that climbs out of the root, and take absolute names as the root's", function()
        local n, err = core.layer_apply(make_tar({ { name = "../escape.txt", data = "x" } }), root, 1e6)
        assert.is_nil(n)
        assert.matches("escape.txt: an entry that climbs out of the root", err, 1, true)
        assert.equal("", helpers.read(outside .. "/../escape.txt") or "")
        n, err = core.layer_apply(make_tar({ { name = "/etc/abs.txt", data = "inside" } }), root, 1e6)
        assert.equal(6, n, err)
        assert.equal("inside", helpers.read(root .. "/etc/abs.txt"))
    end)

    it("refuse whiteouts of \".\" and \"..\", which would empty the directory above", function()
        helpers.write(root .. "/../keep.txt", "kept")
        for _, name in ipairs({ ".wh...", "sub/.wh...", ".wh..", ".wh." }) do
            local n, err = core.layer_apply(make_tar({ { name = "sub/file", data = "x" }, { name = name } }), root, 1e6)
            assert.is_nil(n, name)
            assert.matches("a whiteout of no name", err, 1, true)
        end
        assert.equal("kept", helpers.read(root .. "/../keep.txt"))
        assert.equal("x", helpers.read(root .. "/sub/file"))
    end)

    it("never write through a link: a later entry below a link is refused", function()
        local n, err = core.layer_apply(make_tar({
            { name = "lnk", type = "symlink", target = outside },
            { name = "lnk/x.txt", data = "through" },
        }), root, 1e6)
        assert.is_nil(n)
        assert.matches("lnk/x.txt", err, 1, true)
        assert.matches("^d %d+ %.\n$", listing(outside)) -- nothing in it
        -- the link itself stays as data: the jail resolves it inside the root
        local link = io.popen("readlink " .. q(root .. "/lnk"))
        assert.equal(outside .. "\n", link:read("*a"))
        link:close()
    end)

    it("leave devices and FIFOs out, drop setuid bits, copy hard links, refuse links out", function()
        local n, skipped = core.layer_apply(make_tar({
            { name = "bin/su", data = "#!", mode = tonumber("4755", 8) },
            { name = "dev/null", type = "chr" },
            { name = "run/fifo", type = "fifo" },
            { name = "bin/su2", type = "hardlink", target = "bin/su" },
        }), root, 1e6)
        assert.equal(4, n, skipped)
        assert.same({ "dev/null", "run/fifo" }, skipped)
        local l = listing(root)
        assert.matches("f 755 ./bin/su\n", l, 1, true)
        assert.matches("f 755 ./bin/su2\n", l, 1, true)
        assert.not_matches("./dev/null", l, 1, true)
        local err
        n, err = core.layer_apply(make_tar({ { name = "x", type = "hardlink", target = "../../etc/passwd" } }), root, 1e6)
        assert.is_nil(n)
        assert.matches("a hard link to a path outside the root", err, 1, true)
    end)

    it("refuse truncated and oversized archives", function()
        local tar = make_tar({ { name = "big.bin", data = string.rep("z", 20000) } }, 5000)
        local n, err = core.layer_apply(tar, root, 1e6)
        assert.is_nil(n)
        assert.matches("image layer: ", err, 1, true)
        n, err = core.layer_apply(make_tar({ { name = "big.bin", data = string.rep("z", 20000) } }), root, 1000)
        assert.is_nil(n)
        assert.matches("the image is larger than 1000 bytes", err, 1, true)
        n, err = core.layer_apply(make_tar({ { name = "a", data = "1" } }, 100), root, 1e6)
        assert.is_nil(n)
        assert.is_string(err)
    end)
end)

describe("native sessions from image archives #unpriv", function()
    local base, cache, rootfs_tar
    setup(function()
        base = helpers.tmpdir()
        os.execute("chmod 755 " .. q(base))
        cache = base .. "/cache"
        rootfs_tar = base .. "/py.tar"
        assert(os.execute(("/usr/bin/python3 spec/support/python_image.py %s >/dev/null"):format(q(rootfs_tar))) == 0)
        for _, f in ipairs({ { "docker-archive", "d.tar" }, { "oci-archive", "o.tar" }, { "oci", "layout" } }) do
            assert(os.execute(("/usr/bin/python3 spec/support/image_archive.py %s %s %s"):format(q(rootfs_tar), f[1],
                q(base .. "/" .. f[2]))) == 0)
        end
    end)

    local function run(image, code)
        local status, out, err = helpers.cli({ "run", "--image", image, "-c", code },
            { env = "LLMBOX_IMAGE_CACHE=" .. q(cache) })
        return status, out, err
    end

    local CODE = "import os, sys; t = '/usr/local/share/t'; print(sorted(os.listdir(t)), os.listdir(t + '/dir'), "
        .. "open(t + '/new.txt').read().strip(), sys.version_info[0])"

    it("run Python from docker save's format, its layers in order and their whiteouts honoured", function()
        local status, out, err = run("docker-archive:" .. base .. "/d.tar", CODE)
        assert.equal(0, status, err)
        assert.equal("['dir', 'new.txt'] ['b.txt'] from the last layer 3\n", out)
    end)

    it("run the same image from an OCI layout and an OCI archive, unpacked once (content-addressed)", function()
        local before = #(core.listdir(cache) or {})
        local status, out, err = run("oci:" .. base .. "/layout", CODE)
        assert.equal(0, status, err)
        assert.equal("['dir', 'new.txt'] ['b.txt'] from the last layer 3\n", out)
        status, out, err = run("oci-archive:" .. base .. "/o.tar", CODE)
        assert.equal(0, status, err)
        assert.equal("['dir', 'new.txt'] ['b.txt'] from the last layer 3\n", out)
        -- one image in one format: one directory in the cache, named by a digest
        local entries = core.listdir(cache)
        assert.equal(before + 1, #entries)
        for _, e in ipairs(entries) do assert.matches("^" .. string.rep("%x", 64) .. "$", e) end
    end)

    it("give an archive that borrows another image's configuration, with other layers, its own directory", function()
        -- d.tar again, its last layer replaced: the same configuration, another image
        local forged = base .. "/forged.tar"
        assert(os.execute(("/usr/bin/python3 - %s %s <<'EOF'\n"
            .. "import io, json, sys, tarfile\n"
            .. "src, out = sys.argv[1:3]\n"
            .. "with tarfile.open(src) as t, tarfile.open(out, 'w') as o:\n"
            .. "    last = json.load(t.extractfile('manifest.json'))[0]['Layers'][-1]\n"
            .. "    for m in t.getmembers():\n"
            .. "        data = t.extractfile(m).read() if m.isfile() else None\n"
            .. "        if m.name == last:\n"
            .. "            buf = io.BytesIO()\n"
            .. "            with tarfile.open(fileobj=buf, mode='w') as l:\n"
            .. "                info = tarfile.TarInfo('usr/local/share/t/new.txt'); body = b'forged\\n'\n"
            .. "                info.size = len(body); l.addfile(info, io.BytesIO(body))\n"
            .. "            data = buf.getvalue(); m.size = len(data)\n"
            .. "        o.addfile(m, io.BytesIO(data) if data is not None else None)\n"
            .. "EOF"):format(q(base .. "/d.tar"), q(forged))) == 0)
        local status, out, err = run("docker-archive:" .. forged, "print(open('/usr/local/share/t/new.txt').read().strip())")
        assert.equal(0, status, err)
        assert.equal("forged\n", out)
        -- and the genuine image still gets its own files
        status, out, err = run("docker-archive:" .. base .. "/d.tar", "print(open('/usr/local/share/t/new.txt').read().strip())")
        assert.equal(0, status, err)
        assert.equal("from the last layer\n", out)
    end)

    it("sweep the work directories of unpacks that were killed, and only those", function()
        os.execute("mkdir -p " .. q(cache))
        -- a killed unpack's (no such process; an hour old), a running one's (this process), a
        -- killed one's that is still new (another pid namespace may be unpacking into it)
        local me = io.open("/proc/self/stat"):read("*l"):match("^(%d+)")
        local stale, live, young = ".unpack-999999999-0a1b", ".unpack-" .. me .. "-0c1d", ".unpack-999999998-0e1f"
        for _, d in ipairs({ stale, live, young }) do assert(os.execute("mkdir " .. q(cache .. "/" .. d)) == 0) end
        os.execute(("touch -d '1 hour ago' %s %s"):format(q(cache .. "/" .. stale), q(cache .. "/" .. live)))
        local status, _, err = run("docker-archive:" .. base .. "/d.tar", "print(1)")
        assert.equal(0, status, err)
        local left = {}
        local p = io.popen("ls -A " .. q(cache))
        for e in p:lines() do
            if e:match("^%.unpack") then left[#left + 1] = e end
        end
        p:close()
        table.sort(left)
        assert.same({ live, young }, left)
        os.execute("rm -rf " .. q(cache .. "/" .. live) .. " " .. q(cache .. "/" .. young))
    end)

    it("leave the cache as it was when an archive is damaged, and check OCI blobs against their digests", function()
        local before = table.concat(core.listdir(cache) or {}, ",")
        local data = helpers.read(base .. "/d.tar")
        -- a copy cut short in its big layer, whose manifest says nothing different
        local cut = helpers.write(base .. "/cut.tar", data:sub(1, 60 * 1024 * 1024))
        local status, _, err = run("docker-archive:" .. cut, "print(1)")
        assert.equal(125, status)
        assert.matches("image docker-archive:" .. cut .. ": ", err, 1, true)
        assert.equal(before, table.concat(core.listdir(cache) or {}, ","))
        -- a layout whose layer blob was changed after its digest was taken
        os.execute(("cp -r %s %s"):format(q(base .. "/layout"), q(base .. "/bad")))
        local idx = json.decode(helpers.read(base .. "/bad/index.json"))
        local m = json.decode(helpers.read(base .. "/bad/blobs/sha256/" .. idx.manifests[1].digest:sub(8)))
        local victim = base .. "/bad/blobs/sha256/" .. m.layers[1].digest:sub(8)
        helpers.write(victim, helpers.read(victim) .. "tampered")
        os.execute("rm -rf " .. q(cache))
        local s, serr = llmbox.session({ lang = "python", image = "oci:" .. base .. "/bad" })
        assert.is_nil(s)
        assert.matches("does not match its digest", serr, 1, true)
    end)

    it("runs from the archives `docker save` writes, when docker is here", function()
        local images = require "spec.support.busybox_image"
        if not helpers.read("/usr/bin/docker") then
            pending("no docker client to save an image with")
            return
        end
        local ready, why_not = images.python_engine("docker")
        if not ready then
            pending(why_not)
            return
        end
        local saved = base .. "/saved.tar"
        assert(os.execute(("docker save -o %s %s"):format(q(saved), q(images.PYTHON_IMAGE))) == 0)
        os.execute("chmod 644 " .. q(saved))
        local status, out, err = run("docker-archive:" .. saved, "import sys; print(sys.version_info[0])")
        assert.equal(0, status, err)
        assert.equal("3\n", out)
    end)

    it("say what an image reference must look like", function()
        local r, err = unpack.rootfs("docker-archive:" .. base .. "/missing.tar")
        assert.is_nil(r)
        assert.matches("missing.tar does not exist", err, 1, true)
    end)
end)

-- The issue's own test image: Debian 12 built by debootstrap from Debian's packages (minbase and
-- python3-minimal, spec/support/debian_image.sh; root only), saved as `docker save` writes it,
-- and Python run from it on both daemon-less backends.
describe("a Debian image that debootstrap made, saved and run", function()
    local archive, cache, programs
    setup(function()
        local base = helpers.tmpdir()
        os.execute("chmod 755 " .. q(base))
        cache = base .. "/cache"
        archive = base .. "/debian-image.tar"
        local tar = base .. "/debian.tar"
        assert(os.execute(("spec/support/debian_image.sh %s >&2 && /usr/bin/python3 spec/support/image_archive.py "
            .. "%s docker-archive %s"):format(q(tar), q(tar), q(archive))) == 0)
        -- what the image's /usr/bin holds (a few hundred programs: minbase)
        local p = io.popen("tar -tf " .. q(tar) .. " | grep -c '^\\./usr/bin/[^/][^/]*$'")
        programs = tonumber(p:read("*a"))
        p:close()
    end)

    for _, B in ipairs({ "native", "bubblewrap" }) do
        it("runs Python from it on " .. B, function()
            local status, out, err = helpers.cli({ "run", "-b", B, "--image", "docker-archive:" .. archive, "-c",
                "import os, sys\nprint(sys.version_info[:2], sys.executable, len(os.listdir('/usr/bin')))" },
                { env = "LLMBOX_IMAGE_CACHE=" .. q(cache) })
            assert.equal(0, status, err)
            -- bookworm's Python, from the image's /usr (not the host's, which has many more programs)
            assert.equal(("(3, 11) /usr/bin/python3 %d\n"):format(programs), out)
        end)
    end
end)
