-- Root filesystems on the native backend (issue 16): a session runs an image's interpreters
-- instead of the host's, from a directory (rootfs = DIR, --image dir:DIR); archives_spec has
-- the image archives. The image here is the
-- container specs' Python image (spec/support/python_image.py, made from this host's own files),
-- unpacked into a directory.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"

local q = helpers.shell_quote

-- The same on the bubblewrap backend, whose jail bwrap builds from the same root.
for _, B in ipairs({ "native", "bubblewrap" }) do
describe(B .. " sessions from a root filesystem #unpriv", function()
    local root, evil
    setup(function()
        local base = helpers.tmpdir()
        root, evil = base .. "/py", base .. "/evil"
        -- (the jail reads the root as its own host uid: nobody's, when the specs run as root)
        os.execute("chmod 755 " .. q(base))
        assert(os.execute(("/usr/bin/python3 spec/support/python_image.py %s/py.tar >/dev/null && mkdir %s && "
            .. "tar -xf %s/py.tar -C %s && rm %s/py.tar"):format(q(base), q(root), q(base), q(root), q(base))) == 0)
        -- the same root, with links that point at the host's files, as a hostile image would carry
        assert(os.execute(("cp -al %s %s && ln -sf /etc/shadow %s/etc/localtime && rm -rf %s/etc/ssl && "
            .. "mkdir -p %s/etc/ssl && ln -s ../../../../../../../../etc %s/etc/ssl/certs"):format(q(root), q(evil),
            q(evil), q(evil), q(evil), q(evil))) == 0)
    end)

    it("run the image's interpreter and libraries, not the host's", function()
        local host = assert(llmbox.run("import os, sys; print(len(os.listdir('/usr/bin')))"))
        local r = assert(llmbox.run("import os, sys; print(len(os.listdir('/usr/bin')))\nprint(sys.executable)",
            { rootfs = root, backend = B }))
        assert.equal(0, r.exit_code, r.stderr)
        local n = tonumber(r.stdout:match("^(%d+)"))
        -- the image holds a few hundred programs; the host where the specs run, many more
        assert.is_true(n < tonumber(host.stdout), r.stdout .. " against the host's " .. host.stdout)
        local image_bin = assert(io.open(root .. "/usr/bin")) and io.popen("ls " .. q(root .. "/usr/bin") .. " | wc -l")
        assert.equal(n, tonumber(image_bin:read("*a")))
        image_bin:close()
    end)

    it("keep a session's workspace and bring back plots drawn with the image's matplotlib", function()
        local s = assert(llmbox.session({ lang = "python", image = "dir:" .. root, backend = B }))
        finally(function() s:close() end)
        assert.equal(0, assert(s:run("open('kept.txt', 'w').write('yes')")).exit_code)
        local r = assert(s:run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint(open('kept.txt').read())"))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("yes\n", r.stdout)
        assert.equal(1, #r.plots)
        assert.equal("\137PNG", r.plots[1].data:sub(1, 4))
    end)

    it("run interactive sessions from the image", function()
        local s = assert(llmbox.session({ lang = "python", rootfs = root, interactive = true, backend = B }))
        finally(function() s:close() end)
        assert(s:run("import sys\nv = sys.version_info[:2]"))
        local r = assert(s:run("v"))
        assert.matches("^%(3, %d+%)$", r.value)
    end)

    it("resolve the image's links inside it: none reaches the host's files", function()
        local r = assert(llmbox.run("import os\nprint(os.path.exists('/etc/localtime'))\nprint(sorted(os.listdir('/etc/ssl/certs')))",
            { rootfs = evil, backend = B }))
        assert.equal(0, r.exit_code, r.stderr)
        -- /etc/localtime -> /etc/shadow is the image's /etc/shadow (none); /etc/ssl/certs -> ../../.. is the
        -- image's own /etc
        assert.equal("False", r.stdout:match("^(%a+)\n"))
        assert.not_matches("shadow", r.stdout, 1, true)
        assert.matches("'matplotlibrc'", r.stdout, 1, true)
    end)

end)
end

describe("root filesystems: what is refused #unpriv", function()
    local root
    setup(function()
        local base = helpers.tmpdir()
        root = base .. "/py"
        os.execute("chmod 755 " .. q(base))
        assert(os.execute(("/usr/bin/python3 spec/support/python_image.py %s/py.tar >/dev/null && mkdir %s && "
            .. "tar -xf %s/py.tar -C %s && rm %s/py.tar"):format(q(base), q(root), q(base), q(root), q(base))) == 0)
    end)

    it("refuse what is not a root filesystem, archives that are not there, and backends without roots", function()
        local s, err = llmbox.session({ lang = "python", rootfs = "/nonexistent/root" })
        assert.is_nil(s)
        assert.matches("root filesystem /nonexistent/root: not a directory with a /usr", err, 1, true)
        s, err = llmbox.session({ lang = "r", image = "dir:" .. root })
        assert.is_nil(s)
        assert.matches("root filesystem " .. root .. " has no /usr/bin/Rscript, the r recipe's interpreter", err, 1, true)
        s, err = llmbox.session({ lang = "python", image = "docker-archive:/nonexistent/image.tar" })
        assert.is_nil(s)
        assert.matches("image docker-archive:/nonexistent/image.tar: /nonexistent/image.tar does not exist", err, 1, true)
        s, err = llmbox.session({ lang = "python", backend = "docker", rootfs = root })
        assert.is_nil(s)
        assert.matches('backend "docker" runs no root filesystem of the caller\'s', err, 1, true)
        assert.has_error(function() llmbox.session({ rootfs = 42 }) end,
            "session: rootfs must be the path of a root filesystem (a directory)")
        -- the CLI takes the transport in --image
        local status, out, cerr = helpers.cli({ "run", "--image", "dir:" .. root, "-c", "print(40 + 2)" })
        assert.equal(0, status, cerr)
        assert.equal("42\n", out)
        status, out, cerr = helpers.cli({ "run", "--image", "oci:/nonexistent/layout", "-c", "print(1)" })
        assert.equal(125, status)
        assert.equal("", out)
        assert.matches("image oci:/nonexistent/layout: /nonexistent/layout does not exist", cerr, 1, true)
    end)
end)
