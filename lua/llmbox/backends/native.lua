-- The native backend: our own jail, built by the C core (runtime/, backends/native.c).
-- This driver translates the neutral sandbox spec (llmbox.plan) into the core's
-- open config. Copies go straight to C; runs are driven from here, step by step, so the output
-- callbacks are called from Lua (never from inside C: they may yield, and a failing one stops
-- the run cleanly), and an event loop could drive the same steps (run:fds(), run:step(0)).
local core = require "llmbox.core"

local setmetatable, pcall, tostring, format = setmetatable, pcall, tostring, string.format

local _M = { _VERSION = "0.1.0", name = "native" }

_M.capabilities = core.backends().native

-- Every jail's setup child and every run's first child is llmbox's helper (runtime/run_helper.c),
-- exec'd: beside the C module (build/lib/llmbox/llmbox-run, or where `make install` put it).
-- Without it sessions fail and say so (lb_exec_helper). _M.helper: its path once set; else
-- _M.helper_error says why (llmbox doctor shows either).
do
    local so = package.searchpath("llmbox.core", package.cpath)
    local path = so and so:gsub("core%.so$", "llmbox-run")
    local real, err = nil, "llmbox's C module (core.so) was not found on package.cpath"
    if path then real, err = core.set_run_helper(path) end
    if real then _M.helper = real else _M.helper_error = err end
end

-- Where things are in the jail: the workspace is the session's size-limited tmpfs, llmbox's own
-- files (the code, the recipes' hooks, plots) live in the jail's private /tmp, outside it.
_M.layout = { workspace = "/sandbox", code = "/tmp/llmbox", plots = "/tmp/llmbox/plots", tmp = "/tmp" }

-- Collects what finished prestarted runs left going away (pools call it when idle); with
-- `block`, waits for all of them (a pool's close).
function _M.maintain(block)
    core.reap(block)
end

-- Can this host make jails? The same probes `llmbox doctor` shows (tried in a throwaway child);
-- doctor goes further and runs a real jail.
function _M.usable()
    local p = core.probe()
    local missing = {}
    if not p.userns then missing[#missing + 1] = "user namespaces cannot be created (" .. p.userns_error .. ")" end
    if not p.seccomp then missing[#missing + 1] = "no seccomp filter can be loaded" end
    if not p.mount_setattr then missing[#missing + 1] = "the kernel lacks mount_setattr (Linux >= 5.12)" end
    if not p.openat2 then missing[#missing + 1] = "the kernel lacks openat2 (Linux >= 5.6)" end
    if #missing > 0 then return false, table.concat(missing, "; ") .. ": run `llmbox doctor` for fixes" end
    return true
end

-- Drives a started run to its end: steps (sleeping in poll until something is due), hands the
-- output on to the callbacks in order, and returns the result. A callback that fails stops the
-- run, which then fails with that callback's error.
local function drive(run, on_stdout, on_stderr)
    local failed = nil
    local function deliver(over)
        local chunks = run:take()
        if not chunks then return end
        for i = 1, #chunks, 2 do
            local fn = chunks[i] == "stdout" and on_stdout or on_stderr
            if fn and not failed then
                local ok, err = pcall(fn, chunks[i + 1])
                if not ok then
                    failed = format("%s callback failed: %s", chunks[i] == "stdout" and "on_stdout" or "on_stderr",
                        tostring(err))
                    if not over then run:abort(failed) end
                end
            end
        end
    end
    repeat
        local over = run:step(-1)
        deliver(false)
    until over
    local res, err, code = run:result()
    deliver(true) -- what ending the run streamed (a command that could not start)
    return res, err, code
end

_M.drive = drive

-- A prestarted run (pools): waits for its request; finish() hands it over and drives the run.
local Pending = {}
Pending.__index = Pending

function Pending:wait(ms) return self.pending:wait(ms) end
function Pending:abandon() return self.pending:abandon() end

function Pending:finish(io)
    local run, err, code = self.pending:start(io)
    if not run then return nil, err, code end
    return drive(run, io.on_stdout, io.on_stderr)
end

-- An interactive program's cell (llmbox.interactive): the program stays for the next one unless
-- the result says state_lost.
function Pending:run_cell(io)
    local run, err, code = self.pending:cell(io)
    if not run then return nil, err, code end
    return drive(run, io.on_stdout, io.on_stderr)
end

-- An open jail. The C session underneath is closed by close() or when it is collected.
local Handle = {}
Handle.__index = Handle

function Handle:run(spec)
    local run, err, code = self.session:start(spec)
    if not run then return nil, err, code end
    return drive(run, spec.on_stdout, spec.on_stderr)
end

-- A run the caller drives itself (an event loop): run:fds(), run:step(0), run:take(), run:result().
function Handle:start(spec) return self.session:start(spec) end

function Handle:prestart(spec)
    local pending, err, code = self.session:prestart(spec)
    if not pending then return nil, err, code end
    return setmetatable({ pending = pending }, Pending)
end

function Handle:copy_in(...) return self.session:copy_in(...) end
function Handle:copy_out(...) return self.session:copy_out(...) end
-- A run's results in memory, through a tar stream from the jail side (never a host directory).
function Handle:collect(path, max) return self.session:collect(path, max) end
-- Opening and emptying are work a child does: tasks with the steps of a run (task:fds(),
-- task:step(0), task:result()), so an event loop can do other work meanwhile. finish() is the
-- blocking loop over them.
local function finish(task)
    repeat until task:step(-1)
    return task:result()
end

_M.finish = finish

--- handle:reset_start() -> task (its result: true) | nil, err; handle:reset() waits for it
function Handle:reset_start() return self.session:reset_start() end
function Handle:reset()
    local task, err, code = self.session:reset_start()
    if not task then return nil, err, code end
    return finish(task)
end
--- handle:install_network() -> hosts | nil, err: library installs' egress, made by the first
--- install that needs a network (installs never get the host's network): its names resolved
--- and pinned now; hosts: the /etc/hosts of the install runs (the jail's, and those names)
function Handle:install_network()
    if self.install_egress then return self.install_hosts end
    local want = self.install_plan
    if not want then return nil, "this session's policy gives installs no network (libraries.network)" end
    local plan, perr = require("llmbox.egress").plan(want.allow, { optional = want.derived, restricted = true })
    if not plan then
        return nil, ("policy %q: libraries.%s"):format(want.policy, (perr:gsub("^network%.allow", "network_allow")))
    end
    local ok, err, code = self.session:egress(plan.ruleset, os.getenv("LLMBOX_PASTA"), true)
    if not ok then return nil, "the install's egress: " .. tostring(err), code end
    self.install_egress, self.install_hosts = true, (self.hosts or "") .. plan.hosts
    return self.install_hosts
end

--- handle:network_denied([installs]) -> { "addr:port", ... } | nil: what egress (the
--- installs' with installs) refused since the last call
function Handle:network_denied(installs)
    if not (installs and self.install_egress or not installs and self.egress) then return nil end
    local text = self.session:egress_denied(installs)
    local list = text and require("llmbox.egress").denied(text)
    return list and #list > 0 and list or nil
end
function Handle:close() return self.session:close() end
function Handle:closed() return self.session:closed() end

-- The core's open config for a neutral sandbox spec (llmbox.plan), or nil, err. Deny by
-- default: what the jail cannot honour is refused, never run with less. `name`: the backend
-- the errors name (the bubblewrap driver translates with this too).
local function translate(spec, name)
    name = name or "native"
    local pol = spec.policy
    if spec.image then
        return nil, ("an image was asked for (%s); the %s backend runs the host's interpreters, or a root "
            .. "filesystem (rootfs = DIR, --image dir:DIR): use a backend that runs images (docker, podman)")
            :format(spec.image, name)
    end
    local egress
    -- (egress: runtime/egress.c, for any jail session of the core: native's and bwrap's)
    local has_egress = name == "native" or name == "bubblewrap"
    if spec.network.mode == "egress" and has_egress then
        -- the names resolved and pinned now, the ruleset made from them and the host's
        -- addresses now; the session gets its network once the jail is open (Opening:result)
        local eerr
        egress, eerr = require("llmbox.egress").plan(spec.network.allow)
        if not egress then return nil, ("policy %q: %s"):format(pol.name, eerr) end
    elseif spec.network.mode ~= "none" then
        -- Deny by default: nothing but loopback exists in the jail, so say so instead of
        -- running with a network the policy did not get.
        return nil, ("policy %q asks for network mode %q; the %s backend provides %s"):format(pol.name,
            spec.network.mode, name, has_egress and '"none" (loopback only) and "egress"'
            or '"none" (loopback only); egress: the native and bubblewrap backends, so far')
    end
    -- library installs' own egress: made by the first install that needs it (its names are
    -- resolved then, not here: a session that never installs never waits on DNS)
    local install = spec.install_network and has_egress and
        { allow = spec.install_network.allow, derived = spec.install_network.derived, policy = pol.name } or nil
    if spec.limits.cgroup == "require" then
        local version, _, _, note = core.cgroup()
        if version == 0 then
            return nil, ("policy %q requires cgroup-enforced limits (limits.cgroup = \"require\"), "
                .. "but this host offers none: %s"):format(pol.name, note)
        end
    end
    if spec.limits.cpus then
        local _, _, _, note, cpu = core.cgroup()
        if not cpu then
            return nil, ("policy %q sets a CPU quota (limits.cpus = %s), but this host offers no cpu "
                .. "cgroup to enforce it: %s"):format(pol.name, tostring(spec.limits.cpus), note)
        end
    end
    local sc = spec.syscalls
    -- Resolve names here so a typo is reported with the policy file and the key, not just by C.
    for _, list in ipairs({ "deny", "allow" }) do
        for i, call in ipairs(sc[list] or {}) do
            if not core.syscall_number(call) then
                return nil, ("policy %q (%s): syscalls.%s[%d]: unknown syscall %q on this architecture")
                    :format(pol.name, tostring(pol.path), list, i, call)
            end
        end
    end
    local ro = spec.mounts
    if spec.rootfs then
        -- an image's root: the runtime paths come from it, resolved inside it; the offline
        -- sources of installs stay the host's
        ro = {}
        for i, m in ipairs(spec.mounts) do
            ro[i] = { src = m.src, dst = m.dst, optional = m.optional, in_root = not m.install_source }
        end
    end
    return {
        ro = ro,
        rootfs = spec.rootfs,
        workspace = spec.limits.workspace,
        tmp = spec.limits.tmp,
        hostname = spec.hostname,
        host_uid = tonumber(os.getenv("LLMBOX_HOST_UID")) or 65534,
        host_gid = tonumber(os.getenv("LLMBOX_HOST_GID")) or 65534,
        syscalls = sc,
        hosts_extra = egress and egress.hosts ~= "" and egress.hosts or nil,
        egress = egress,
        install_egress = install,
    }
end

-- A jail being opened: the core's task, whose result is a handle.
local Opening = {}
Opening.__index = Opening

function Opening:fds() return self.task:fds() end
function Opening:step(wait_ms) return self.task:step(wait_ms) end
function Opening:result()
    local session, err, code = self.task:result()
    if not session then return nil, err, code end
    if self.egress then
        -- (blocks while pasta starts: ~25 ms)
        local ok, eerr, ecode = session:egress(self.egress.ruleset, os.getenv("LLMBOX_PASTA"))
        if not ok then
            session:close()
            return nil, "egress: " .. tostring(eerr), ecode
        end
    end
    return setmetatable({ session = session, egress = self.egress ~= nil, install_plan = self.install_egress,
        hosts = self.hosts }, Handle)
end

_M.translate = translate

--- native.opening(core_backend, cfg) -> opening | nil, err: a jail session that the core's driver
--- of that name (native, bubblewrap) opens from its open config, without blocking the caller
function _M.opening(core_backend, cfg)
    local task, err, code = core.open_start(core_backend, cfg)
    if not task then return nil, err, code end
    local hosts
    if cfg.install_egress then
        -- the jail's /etc/hosts, which an install run's own extends (Handle:install_network)
        for _, f in ipairs(core.jail_etc(cfg.hostname or "llmbox")) do
            if f.path == "/etc/hosts" then hosts = f.data .. (cfg.hosts_extra or "") end
        end
    end
    return setmetatable({ task = task, egress = cfg.egress, install_egress = cfg.install_egress, hosts = hosts }, Opening)
end

--- native.open_start(spec) -> opening | nil, err: opens a jail without blocking the caller
--- (opening:fds(), opening:step(0), then opening:result() -> handle | nil, err)
function _M.open_start(spec)
    local cfg, err = translate(spec)
    if not cfg then return nil, err end
    return _M.opening("native", cfg)
end

--- native.open(spec) -> handle | nil, err: a jail from a neutral sandbox spec (llmbox.plan)
function _M.open(spec)
    local opening, err, code = _M.open_start(spec)
    if not opening then return nil, err, code end
    return finish(opening)
end

return _M
