-- Shared spec helpers: run the real CLI, make temporary files, plant host secrets.
local util = require "llmbox.util"
local uv = require "luv"

local _M = {}

_M.root = os.getenv("PWD") or "."
_M.bin = _M.root .. "/build/bin/llmbox"

local function shell_quote(s)
    return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
_M.shell_quote = shell_quote

-- This process's private directory for temporary files (under $TMPDIR or /tmp), made on first
-- use and removed with everything in it when busted closes the Lua state at exit. Mode 0711: no
-- one else can create or list anything in it, but a jail's setup (the sandbox user) can reach
-- the files a spec hands it by name, such as a policy's find_links directory.
local private
function _M.private_dir()
    if not private then
        private = assert(util.private_dir("llmbox-spec"))
        assert(uv.fs_chmod(private, tonumber("711", 8)))
        local guard = newproxy(true)
        -- (rm, not luv: C modules may already be unloaded while the state closes)
        getmetatable(guard).__gc = function() os.execute("rm -rf -- " .. shell_quote(private)) end
        _M._private_guard = guard
    end
    return private
end

-- A new empty file (mode 0600) in the private directory, like os.tmpname() but nowhere another
-- user can reach; `suffix` (".py") is appended to the name.
local counter = 0
function _M.tmpname(suffix)
    counter = counter + 1
    local path = ("%s/%d%s"):format(_M.private_dir(), counter, suffix or "")
    local fd = assert(uv.fs_open(path, "wx", tonumber("600", 8)))
    uv.fs_close(fd)
    return path
end

-- A name in the private directory that nothing has yet, for a file or directory the caller makes
-- (nobody else can make it first: the directory is ours alone).
function _M.tmppath(suffix)
    counter = counter + 1
    return ("%s/%d%s"):format(_M.private_dir(), counter, suffix or "")
end

-- A new empty directory (mode 0700) in the private directory.
function _M.tmpdir()
    counter = counter + 1
    local path = ("%s/%d.d"):format(_M.private_dir(), counter)
    assert(uv.fs_mkdir(path, tonumber("700", 8)))
    return path
end

function _M.write(path, data)
    local f = assert(io.open(path, "wb"))
    f:write(data)
    f:close()
    return path
end

function _M.read(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local d = f:read("*a")
    f:close()
    return d
end

-- Monotonic seconds (busted's os.clock is CPU time).
--- helpers.capture(shell_command) -> what it wrote on stdout
function _M.capture(cmd)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out
end

function _M.now()
    return require("llmbox.util").now_ms() / 1000
end

function _M.uid()
    local p = io.popen("id -u")
    local u = p:read("*l")
    p:close()
    return u
end

-- What the Kubernetes stand-in's pods (native jails of this host; spec/support/k8s_standin.py)
-- lack that a cluster's containers have, for the conformance run on it (spec/run.sh sets
-- LLMBOX_K8S_STANDIN); a real cluster (KUBECONFIG) runs these checks.
local STANDIN_LACKS = {
    counters = "the kubernetes stand-in's pods (native jails of this host) show no cgroup counters at "
        .. "/sys/fs/cgroup, which a cluster's containers do, and this verdict is read from them",
    tty = "the kubernetes stand-in's pods (native jails of this host) have no /dev/tty, which every "
        .. "container runtime makes",
}

--- helpers.standin_lacks(what) -> reason | nil: on the stand-in, why a check cannot be made there
function _M.standin_lacks(what)
    if os.getenv("LLMBOX_K8S_STANDIN") == "1" and os.getenv("LLMBOX_BACKEND") == "kubernetes" then
        return assert(STANDIN_LACKS[what], what)
    end
end

function _M.is_root()
    return _M.uid() == "0"
end

-- The directories llmbox makes per-run cgroups in on this host: v2's base ($LLMBOX_CGROUP or
-- /sys/fs/cgroup/llmbox) or v1's per controller; {} where it can make none. A spec that looks
-- for leftovers in v1's paths only would find none on a v2 host, and pass without looking.
function _M.cgroup_bases()
    local version = require("llmbox.core").cgroup()
    if version == 2 then
        local env = os.getenv("LLMBOX_CGROUP")
        return { env and env ~= "" and env or "/sys/fs/cgroup/llmbox" }
    elseif version == 1 then
        local out = {}
        for _, c in ipairs({ "memory", "pids", "cpuacct", "cpu" }) do out[#out + 1] = "/sys/fs/cgroup/" .. c .. "/llmbox" end
        return out
    end
    return {}
end

-- Runs `llmbox ARGS...`; returns exit status, stdout, stderr. `opts.stdin` feeds standard input,
-- `opts.env` ("NAME=value ...") goes before the command, `opts.merge` sends stderr to stdout.
-- How many sandboxes the native driver opens while fn runs (specs that prove work is not done).
function _M.count_opens(fn)
    local native = require "llmbox.backends.native"
    local open, n = native.open, 0
    native.open = function(...)
        n = n + 1
        return open(...)
    end
    local ok, err = pcall(fn)
    native.open = open
    assert(ok, err)
    return n
end

function _M.cli(args, opts)
    opts = opts or {}
    local out, err = _M.tmpname(), _M.tmpname()
    local parts = {}
    for i, a in ipairs(args) do parts[i] = shell_quote(a) end
    local cmd = shell_quote(_M.bin) .. " " .. table.concat(parts, " ")
    local inp
    if opts.stdin then
        inp = _M.write(_M.tmpname(), opts.stdin)
        cmd = cmd .. " <" .. shell_quote(inp)
    else
        cmd = cmd .. " </dev/null"
    end
    if opts.env then cmd = opts.env .. " " .. cmd end
    -- opts.merge: standard error goes where standard output goes, as on a terminal
    local redirect = opts.merge and (" >" .. shell_quote(out) .. " 2>&1") or (" >" .. shell_quote(out) .. " 2>" .. shell_quote(err))
    local ok, _, code = os.execute(cmd .. redirect)
    -- LuaJIT (5.1 semantics): os.execute returns the raw wait status.
    local status = type(ok) == "number" and math.floor(ok / 256) or code
    local o, e = _M.read(out), _M.read(err)
    os.remove(out); os.remove(err)
    if inp then os.remove(inp) end
    return status, o, e
end

-- A Python snippet's result in a fresh one-run session.
function _M.py(code, opts)
    local llmbox = require "llmbox"
    local s = assert(llmbox.session({ lang = "python", policy = opts and opts.policy }))
    local r, err = s:run(code, opts and opts.run)
    s:close()
    return r, err
end

-- Why a session's image lacks what a spec needs (the shell command `probe` fails in it), or
-- nil; native always has the host's libraries.
function _M.image_lacks(s, probe, what)
    if not s.driver.capabilities.images then return nil end
    local r = s:exec(probe)
    if r and r.exit_code == 0 then return nil end
    return ("the image %s has no %s"):format(tostring(s.handle.spec and s.handle.spec.image), what)
end

-- Why a session's language cannot run in its image, or nil: on backends that run images an
-- image may lack a language (the Python test image, spec/support/python_image.py), and the specs
-- of that language say so instead of failing; the conformance suite's image
-- (spec/support/langs_image.py) has them all. Native always runs the host's toolchains.
function _M.missing_toolchain(s)
    if not s.driver.capabilities.images then return nil end
    -- the toolchain the recipe's version command names (run may be a hook or a built binary)
    local version = table.concat(s.recipe.version or s.recipe.run, " ")
    for _, t in ipairs({ version:match("/usr/bin/[%w%+%-%.]+") or s.recipe.run[1] }) do
        local name = t:match("[^/]+$")
        local r = s:exec(("[ -x %s ] || command -v %s"):format(shell_quote(t), shell_quote(name)))
        if not r or r.exit_code ~= 0 then
            return ("the image %s has no %s")
                :format(tostring(s.handle.spec and s.handle.spec.image), name)
        end
    end
    return nil
end

return _M
