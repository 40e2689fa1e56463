-- The native backend: our own jail, built by the C core (runtime/, backends/native.c).
-- This driver translates a validated policy (and the recipe's extra paths) into the core's
-- open config; runs and copies go straight to C.
local core = require "llmbox.core"

local _M = { _VERSION = "0.1.0", name = "native" }

_M.capabilities = core.backends().native

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

local function ro_mounts(policy, recipe)
    local ro = {}
    for _, m in ipairs(policy.filesystem.ro) do
        ro[#ro + 1] = { src = m.src, dst = m.dst or m.src, optional = m.optional }
    end
    for _, p in ipairs(recipe and recipe.mounts or {}) do
        -- a toolchain that is not installed simply lacks its files: optional
        ro[#ro + 1] = { src = p, dst = p, optional = true }
    end
    local lib = policy.libraries
    if lib and lib.allow then
        -- offline sources the package managers read, at the same paths inside
        for _, d in ipairs(lib.sources.python and lib.sources.python.find_links or {}) do
            ro[#ro + 1] = { src = d, dst = d, optional = false }
        end
        local r, ruby = lib.sources.r, lib.sources.ruby
        for _, local_dir in pairs({ r = r and r.repos, ruby = ruby and ruby.source }) do
            if local_dir:sub(1, 1) == "/" then ro[#ro + 1] = { src = local_dir, dst = local_dir } end
        end
        if lib.network then
            -- name resolution for the install step (the only run that gets a network)
            ro[#ro + 1] = { src = "/etc/resolv.conf", dst = "/etc/resolv.conf", optional = true }
        end
    end
    return ro
end

function _M.open(policy, recipe)
    if policy.network.mode ~= "none" then
        -- Deny by default: nothing but loopback exists in the jail, so say so instead of
        -- running with a network the policy did not get.
        return nil, ("policy %q asks for network mode %q; the native backend only provides "
            .. "\"none\" (loopback only)"):format(policy.name, policy.network.mode)
    end
    if policy.limits.cgroup == "require" then
        local version, _, _, note = core.cgroup()
        if version == 0 then
            return nil, ("policy %q requires cgroup-enforced limits (limits.cgroup = \"require\"), "
                .. "but this host offers none: %s"):format(policy.name, note)
        end
    end
    if policy.limits.cpus then
        local _, _, _, note, cpu = core.cgroup()
        if not cpu then
            return nil, ("policy %q sets a CPU quota (limits.cpus = %s), but this host offers no cpu "
                .. "cgroup to enforce it: %s"):format(policy.name, tostring(policy.limits.cpus), note)
        end
    end
    local sc = policy.syscalls
    -- Resolve names here so a typo is reported with the policy file and the key, not just by C.
    for _, list in ipairs({ "deny", "allow" }) do
        for i, name in ipairs(sc[list] or {}) do
            if not core.syscall_number(name) then
                return nil, ("policy %q (%s): syscalls.%s[%d]: unknown syscall %q on this architecture")
                    :format(policy.name, tostring(policy.path), list, i, name)
            end
        end
    end
    return core.open("native", {
        ro = ro_mounts(policy, recipe),
        workspace = policy.limits.workspace,
        tmp = policy.limits.tmp,
        hostname = "llmbox",
        host_uid = tonumber(os.getenv("LLMBOX_HOST_UID")) or 65534,
        host_gid = tonumber(os.getenv("LLMBOX_HOST_GID")) or 65534,
        syscalls = {
            default = sc.default,
            action = sc.action,
            deny = sc.deny,
            allow = sc.allow,
            deny_namespace_clone = sc.deny_namespace_clone,
            deny_ioctls = sc.deny_ioctls,
        },
    })
end

return _M
