-- A tiny image for the engine specs: a static busybox (Debian's busybox-static, which make test
-- installs) and links for the applets they use, imported through the engine's API (there is no
-- registry here). A name both engines keep as given (Podman would put a short name under
-- docker.io/library/).
local helpers = require "spec.helpers"

local _M = {}

_M.IMAGE = "localhost/llmbox-test-busybox:5"

local APPLETS = { "sh", "id", "cat", "grep", "touch", "unshare", "sleep", "ls", "echo", "tar", "wc", "rm", "mkdir",
    "tr", "kill", "true", "pwd", "mktemp", "chmod", "mv", "stat", "dd", "head" }

--- ensure(e) -> true | nil, err: the image is on engine e
function _M.ensure(e)
    local res = e:request("GET", "/images/" .. _M.IMAGE .. "/json")
    if res and res.status == 200 then return true end
    local dir = helpers.tmpdir()
    local cmd = { "mkdir -p " .. dir .. "/root/bin", "cp /bin/busybox " .. dir .. "/root/bin/busybox" }
    for _, a in ipairs(APPLETS) do cmd[#cmd + 1] = ("ln -s busybox %s/root/bin/%s"):format(dir, a) end
    cmd[#cmd + 1] = ("tar -C %s/root -cf %s/image.tar ."):format(dir, dir)
    assert(os.execute(table.concat(cmd, " && ")))
    local tar = assert(helpers.read(dir .. "/image.tar"))
    return e:json("POST", "/images/create?fromSrc=-&repo=" .. _M.IMAGE, tar,
        { headers = { ["Content-Type"] = "application/x-tar" }, timeout_ms = 60000 })
end

-- The Python image (spec/support/python_image.py): CPython, numpy, matplotlib and Pillow from
-- this host's files, for the conformance suite on the container backends.
_M.PYTHON_IMAGE = "localhost/llmbox-test-python:5"

--- ensure_python(e) -> true | nil, err: the Python image is on engine e
function _M.ensure_python(e)
    local res = e:request("GET", "/images/" .. _M.PYTHON_IMAGE .. "/json")
    if res and res.status == 200 then return true end
    local tar = helpers.tmpdir() .. "/python-image.tar"
    local ok = os.execute("/usr/bin/python3 spec/support/python_image.py " .. tar)
    if ok ~= 0 and ok ~= true then return nil, "spec/support/python_image.py failed" end
    local data = assert(helpers.read(tar))
    os.remove(tar)
    return e:json("POST", "/images/create?fromSrc=-&repo=" .. _M.PYTHON_IMAGE, data,
        { headers = { ["Content-Type"] = "application/x-tar" }, timeout_ms = 300000 })
end

-- The languages image (spec/support/langs_image.py): every toolchain the recipes drive, from
-- this host's Debian packages (make print-deps-langs), for the conformance suite on the
-- container backends. About 1.5 GB: it is streamed from a file to the engine's socket by curl,
-- never held in memory.
_M.LANGS_IMAGE = "localhost/llmbox-test-langs:1"
-- where its root's tar is made (kept while both engines import it)
_M.LANGS_TAR = helpers.root .. "/build/engines/langs-image.tar"

--- ensure_langs(e) -> true | nil, err: the languages image is on engine e (a unix socket's)
function _M.ensure_langs(e)
    local res = e:request("GET", "/images/" .. _M.LANGS_IMAGE .. "/json")
    if res and res.status == 200 then return true end
    if not e.endpoint.socket then return nil, "the languages image is imported through a unix socket" end
    local q = helpers.shell_quote
    -- made once for both engines (spec/run.sh removes it after the conformance runs)
    local tar, out = _M.LANGS_TAR, helpers.tmpdir() .. "/import.out"
    local have = io.open(tar, "rb")
    if have then have:close() end
    if not have then
        local pkgs = io.popen("make -s --no-print-directory print-deps-langs"):read("*a"):gsub("%s+$", "")
        os.execute("mkdir -p " .. q(tar:match("^(.*)/")))
        local ok = os.execute(("/usr/bin/python3 spec/support/langs_image.py %s.part %s && mv %s.part %s"):format(q(tar), pkgs,
            q(tar), q(tar)))
        if ok ~= 0 and ok ~= true then
            os.remove(tar .. ".part")
            return nil, "spec/support/langs_image.py failed"
        end
    end
    -- curl -T streams the file; -X POST keeps the Engine API's method
    local ok = os.execute(("curl -sS --fail --max-time 900 --unix-socket %s -X POST -H 'Content-Type: application/x-tar' "
        .. "-T %s 'http://engine%s/images/create?fromSrc=-&repo=%s' >%s 2>&1"):format(q(e.endpoint.socket), q(tar),
        e.prefix or "", _M.LANGS_IMAGE, q(out)))
    local said = helpers.read(out) or ""
    os.remove(out)
    if (ok ~= 0 and ok ~= true) or said:find('"error"', 1, true) then
        return nil, "importing the languages image: " .. said:sub(1, 500)
    end
    return true
end

--- unavailable(kind, e, why) -> nil when engine e answered, else why the engine specs of that
--- kind cannot run (the spec marks itself pending with it: busted's `pending` must be called
--- from the spec file's own functions)
function _M.unavailable(kind, e, why)
    if e then return nil end
    return ("no %s engine reachable: %s"):format(kind, tostring(why))
end

--- images.python_engine(kind) -> engine | nil, why: the kind's engine with the Python image in
--- it, or why there is none here (for the spec's pending(why); busted gives support modules none)
function _M.python_engine(kind)
    local e, why = require("llmbox.engine").connect(kind)
    local why_not = _M.unavailable(kind, e, why)
    if why_not then return nil, why_not end
    assert(_M.ensure_python(e))
    return e
end

return _M
