-- The container engines' side of the neutral sandbox spec (llmbox.plan): what a Docker or Podman
-- container must be to keep native's promise, as an Engine API ContainerCreate body. Pure data,
-- so the translation is tested without an engine (spec/01-unit/container_spec.lua) and against
-- both real engines (spec/02-integration/engine_spec.lua). The docker and podman drivers send it.
--
--   container.create_body(spec, { image = "python:3.12-slim" }) -> body | nil, err
--   container.seccomp_profile(spec.syscalls) -> an OCI seccomp profile (the policy's rules)
--
-- Deny by default, as everywhere: no network, every capability dropped, no new privileges, the
-- policy's syscall rules as the container's seccomp profile, a read-only root with size-limited
-- tmpfs for the workspace and /tmp, memory and process ceilings, a non-root user, an init that
-- reaps. What a container cannot honour is refused, never run with less.
local type, ipairs, pairs, tostring, format, floor = type, ipairs, pairs, tostring, string.format, math.floor
local core = require "llmbox.core"
local json = require "llmbox.json"

local _M = { _VERSION = "0.1.0" }

-- Where things are in a container: the same paths as native, so recipes and specs need not know.
_M.layout = { workspace = "/sandbox", code = "/tmp/llmbox", plots = "/tmp/llmbox/plots", tmp = "/tmp" }

-- The user programs run as (native's sandbox user has the same ids).
_M.USER = "1000:1000"
-- Root's own small tmpfs (mode 0700): the keeper's FIFO, a run's counts, a warm program's
-- channel; out of the programs' sight, unlike /dev/shm or /tmp.
_M.PRIVATE = "/.llmbox"
-- The keeper's script (see create_body), root's. SIGUSR1 (a kill request, passed on by the
-- engine's init) stops the run: kill(-1) until nothing is left but init and itself. It also
-- watches the pids cgroup's count of refused forks, five times a second, and stops the run at
-- a new one, as native's supervisor does (a fork bomb ends at once, reported as the processes
-- limit). Waiting costs it no process where the shell has `read -t` (a FIFO of its own in
-- PRIVATE), else a sleep in a process slot kept for it; a sleep's fork a fork bomb refuses
-- would end dash, and the container with it, so once the open has placed llmbox's helper the
-- keeper execs it in its place (container-exec --keep, the same work in C, no process to wait).
_M.KEEPER = [[
ev=/sys/fs/cgroup/pids/pids.events; [ -r "$ev" ] || ev=/sys/fs/cgroup/pids.events
count() { n=0; while read -r k v; do [ "$k" = max ] && n=$v; done < "$ev"; } 2>/dev/null
# the count is read again once all is dead: forks refused while it killed are not a new event
sweep() {
  i=0; while kill -0 -1 2>/dev/null && [ $i -lt 100 ]; do kill -9 -1 2>/dev/null; i=$((i + 1)); done
  count; seen=$n
}
trap sweep USR1
count; seen=$n
d=/.llmbox/keeper
# llmbox's helper, once the open has placed it, keeps instead: its wait takes no process
helper() { [ -x /.llmbox/exec ] && exec /.llmbox/exec --keep "$ev"; }
if mkdir -m 700 "$d" 2>/dev/null && mkfifo -m 600 "$d/wake" && exec 3<>"$d/wake"; then
  read -r -t 0.01 _ <&3 2>/dev/null
  if [ $? -ne 2 ]; then
    while :; do
      helper
      read -r -t 0.2 _ <&3
      count
      [ "$n" = "$seen" ] || sweep
    done
  fi
fi
# a shell without read -t (dash): a sleep, in a slot of its own (OWN_PROCESSES)
while :; do
  helper
  sleep 0.2
  count
  [ "$n" = "$seen" ] || sweep
done
]]
-- How many of the container's processes are not the program's: init, the keeper, the
-- keeper's sleep, the run's wrapper and llmbox's helper (engines.lua), which waits for the
-- program. The keeper must always find its slot: dash ends when it cannot fork.
_M.OWN_PROCESSES = 5
-- The container's own processes (init, the keeper): another user than the programs'.
_M.KEEPER_USER = "0:0"

-- The labels that mark what llmbox created: nothing without them is ever removed. The owner
-- (boot id/pid/start time) lets a later process remove what a crashed one left.
_M.LABEL = "io.llmbox.managed"
_M.OWNER = "io.llmbox.owner"

-- The flags of clone(2) that make namespaces (native refuses them the same way).
local CLONE_NEW = {
    0x10000000, -- CLONE_NEWUSER
    0x00020000, -- CLONE_NEWNS
    0x20000000, -- CLONE_NEWPID
    0x40000000, -- CLONE_NEWNET
    0x08000000, -- CLONE_NEWIPC
    0x04000000, -- CLONE_NEWUTS
    0x02000000, -- CLONE_NEWCGROUP
    0x00000080, -- CLONE_NEWTIME
}

local EPERM, ENOSYS = 1, 38

-- 64-bit masks are beyond a double's exact integers: they stay strings of digits here (the
-- only strings among a rule's values) and become bare numbers in the JSON (profile_json),
-- which the engines read as uint64s.
local function u64(v) return (tostring(v):gsub("ULL$", "")) end

--- container.profile_json(profile) -> the profile as JSON, 64-bit values as bare numbers
function _M.profile_json(profile)
    local text = json.encode(profile)
    return (text:gsub('"(value[%w]*)":"(%d+)"', '"%1":%2'))
end

-- The requests of ioctl that an allow-list lets through: every 32-bit value but the denied
-- ones, as aligned blocks of a masked comparison each (the high 32 bits zero). Rules must not
-- overlap: where an allow and a denial both match, Docker's runtime let the allow win.
local function ioctl_allow_blocks(denied)
    local sorted = {}
    for _, d in ipairs(denied) do sorted[#sorted + 1] = d end
    table.sort(sorted)
    local blocks, lo = {}, 0
    local function cover(a, b) -- [a, b], as the largest aligned power-of-two blocks
        while a <= b do
            local size = 1
            while a % (size * 2) == 0 and a + size * 2 - 1 <= b do size = size * 2 end
            blocks[#blocks + 1] = { value = u64(0xffffffffffffffffULL - (size - 1)), valueTwo = a }
            a = a + size
        end
    end
    for _, d in ipairs(sorted) do
        if d > lo then cover(lo, d - 1) end
        lo = math.max(lo, d + 1)
    end
    cover(lo, 0xffffffff)
    return blocks
end

--- container.seccomp_profile(syscalls) -> profile: the policy's syscall rules in the engines'
--- (OCI) profile format, built the way native's filter is (runtime/seccomp.c), so a call gets
--- the same answer on either: EPERM (or a kill) for a refused call, ENOSYS for what an allow
--- list leaves out, clone3 absent so libc falls back to clone, whose namespace flags are refused
--- one by one, and the policy's ioctls refused by number. Only the native ABI is listed: calls
--- through another (i386's int 0x80, x32) match no architecture and are refused.
function _M.seccomp_profile(sc)
    local allow_list = sc.default == "deny"
    local kill = sc.action == "kill"
    -- in allow-list mode the refusals must differ from the default (ENOSYS or kill): EPERM
    local deny = (kill and not allow_list) and "SCMP_ACT_KILL_PROCESS" or "SCMP_ACT_ERRNO"
    local rules = {}
    local function rule(names, action, errno, args)
        local r = { names = names, action = action, args = args }
        if action == "SCMP_ACT_ERRNO" then r.errnoRet = errno end
        rules[#rules + 1] = r
    end
    local listed = {}
    for _, name in ipairs(sc.allow or {}) do listed[name] = true end
    local ns_clone = sc.deny_namespace_clone ~= false
    local ioctls = sc.deny_ioctls or {}
    local families = sc.socket_families
    local profile = { architectures = { "SCMP_ARCH_X86_64" }, syscalls = json.array(rules) }
    if allow_list then
        profile.defaultAction = kill and "SCMP_ACT_KILL_PROCESS" or "SCMP_ACT_ERRNO"
        profile.defaultErrnoRet = ENOSYS
        local names = {}
        for _, name in ipairs(sc.allow or {}) do
            -- clone and ioctl get conditional rules below
            local conditional = (ns_clone and (name == "clone" or name == "clone3")) or (#ioctls > 0 and name == "ioctl")
                or (families and name == "socket")
            if not conditional then names[#names + 1] = name end
        end
        if #names > 0 then rule(names, "SCMP_ACT_ALLOW") end
        if not kill then
            -- the same answer by name for every other call libseccomp knows: an engine that
            -- ignores defaultErrnoRet (dockerd 20.10) would give EPERM, and libc falls back
            -- to older calls on ENOSYS only
            local rest = {}
            local own_rules = { clone = ns_clone, clone3 = ns_clone, ioctl = #ioctls > 0 }
            for _, name in ipairs(core.syscall_names()) do
                if not listed[name] and not own_rules[name] then rest[#rest + 1] = name end
            end
            if #rest > 0 then rule(rest, "SCMP_ACT_ERRNO", ENOSYS) end
        end
    else
        profile.defaultAction = "SCMP_ACT_ALLOW"
        if sc.deny and #sc.deny > 0 then rule(sc.deny, deny, EPERM) end
    end
    if ns_clone then
        rule({ "clone3" }, "SCMP_ACT_ERRNO", ENOSYS)
        local all = 0
        for _, flag in ipairs(CLONE_NEW) do
            rule({ "clone" }, deny, EPERM, { { index = 0, value = flag, valueTwo = flag, op = "SCMP_CMP_MASKED_EQ" } })
            all = all + flag
        end
        if allow_list and listed.clone then
            rule({ "clone" }, "SCMP_ACT_ALLOW", nil, { { index = 0, value = all, valueTwo = 0, op = "SCMP_CMP_MASKED_EQ" } })
        end
    end
    for _, name in ipairs(ioctls) do
        local number = core.ioctl_number(name)
        if number then
            -- the kernel compares ioctl's request as 32 bits
            rule({ "ioctl" }, deny, EPERM,
                { { index = 1, value = 0xffffffff, valueTwo = number, op = "SCMP_CMP_MASKED_EQ" } })
        end
    end
    if allow_list and #ioctls > 0 and listed.ioctl then
        -- a request with no high bits that is not denied
        local denied = {}
        for _, name in ipairs(ioctls) do denied[#denied + 1] = core.ioctl_number(name) end
        for _, b in ipairs(ioctl_allow_blocks(denied)) do
            rule({ "ioctl" }, "SCMP_ACT_ALLOW", nil,
                { { index = 1, value = b.value, valueTwo = b.valueTwo, op = "SCMP_CMP_MASKED_EQ" } })
        end
    end
    -- socket()'s address family, as native refuses it: every family not named, every number
    -- from AF_MAX up (a family with high bits set too), AF_NETLINK but for NETLINK_ROUTE when
    -- only netlink_route is named; an allow list that does not list socket refuses it whole
    if families and (not allow_list or listed.socket) then
        local allowed, route_only = {}, false
        for _, name in ipairs(families) do
            allowed[core.socket_family(name)] = true
            if name == "netlink_route" then route_only = true end
        end
        for _, name in ipairs(families) do
            if name == "netlink" then route_only = false end
        end
        local netlink = core.socket_family("netlink")
        for family = 0, core.AF_MAX - 1 do
            if not allowed[family] then
                rule({ "socket" }, deny, EPERM, { { index = 0, value = family, op = "SCMP_CMP_EQ" } })
            end
        end
        rule({ "socket" }, deny, EPERM, { { index = 0, value = core.AF_MAX, op = "SCMP_CMP_GE" } })
        if route_only and allowed[netlink] then
            rule({ "socket" }, deny, EPERM, { { index = 0, value = netlink, op = "SCMP_CMP_EQ" },
                { index = 2, value = 0, op = "SCMP_CMP_NE" } })
        end
        if allow_list then
            local done = {}
            for _, name in ipairs(families) do
                local family = core.socket_family(name)
                if not done[family] then
                    done[family] = true
                    local args = { { index = 0, value = family, op = "SCMP_CMP_EQ" } }
                    if family == netlink and route_only then args[2] = { index = 2, value = 0, op = "SCMP_CMP_EQ" } end
                    rule({ "socket" }, "SCMP_ACT_ALLOW", nil, args)
                end
            end
        end
    end
    return profile
end

-- The options of a tmpfs of `bytes`. exec: the engines add noexec unless told, and compiled
-- programs run from the code directory in /tmp.
local function tmpfs(bytes, mode)
    return format("rw,exec,nosuid,nodev,size=%d,mode=%s", bytes, mode)
end

-- What of the engine's read-only /sys the programs do not see (native mounts none): all but
-- the container's own cgroups, which the keeper and the verdicts read. A path the kernel
-- lacks is skipped by the runtime.
_M.MASKED_PATHS = { "/sys/block", "/sys/bus", "/sys/class", "/sys/dev", "/sys/devices", "/sys/firmware",
    "/sys/hypervisor", "/sys/kernel", "/sys/module", "/sys/power", "/sys/fs/bpf", "/sys/fs/btrfs", "/sys/fs/erofs",
    "/sys/fs/ext4", "/sys/fs/f2fs", "/sys/fs/fuse", "/sys/fs/nfsd", "/sys/fs/pstore", "/sys/fs/selinux",
    "/sys/fs/smackfs", "/sys/fs/tmpfs", "/sys/fs/xfs",
    -- and no pseudo-terminals (native has none): /dev/ptmx is a link into /dev/pts
    "/dev/pts" }

--- container.update_body(kind, ceilings) -> body: the request that sets a running container's
--- memory, process and CPU ceilings ({ memory =, processes =, cpus = | nil }); Docker takes its
--- ContainerUpdate body, Podman (whose compatible API has no update) the OCI resources of its
--- own /libpod/containers/{id}/update.
function _M.update_body(kind, c)
    local pids = c.processes + _M.OWN_PROCESSES
    -- no quota: Docker's 0 NanoCpus, the kernel's -1 CFS quota
    if kind == "podman" then
        return { memory = { limit = c.memory, swap = c.memory }, pids = { limit = pids },
            cpu = { quota = c.cpus and floor(c.cpus * 100000 + 0.5) or -1, period = 100000 } }
    end
    return { Memory = c.memory, MemorySwap = c.memory, PidsLimit = pids,
        NanoCpus = c.cpus and floor(c.cpus * 1e9 + 0.5) or 0 }
end

--- container.create_body(spec, opts) -> body | nil, err: the ContainerCreate body for a neutral
--- sandbox spec. opts.image (required): the image; opts.labels: more labels; opts.seccomp_file:
--- where the engine finds the profile (Podman, which reads a path; the profile_json of
--- seccomp_profile(spec.syscalls)); without it the profile goes in the body (Docker);
--- opts.nproc: RLIMIT_NPROC to set (Podman: the engine host's hard limit); opts.kind: the
--- engine ("docker" or "podman"), where their APIs differ; opts.local_engine: the engine runs on
--- this host (its socket is here), so the policy's offline install sources are mounted.
function _M.create_body(spec, opts)
    local pol = spec.policy
    if type(opts) ~= "table" or type(opts.image) ~= "string" or opts.image == "" then
        error("create_body: opts.image is required", 2)
    end
    if spec.network.mode ~= "none" then
        return nil, format("policy %q asks for network mode %q; the container backends provide only \"none\" "
            .. "(no network at all): egress is built for the native and bubblewrap backends so far (-b native)", pol.name,
            spec.network.mode)
    end
    local lim = spec.limits
    for _, k in ipairs({ "workspace", "tmp", "memory", "processes" }) do
        if type(lim[k]) ~= "number" or not (lim[k] > 0) then
            return nil, format("sandbox spec: limits.%s must be a positive number", k)
        end
    end
    local labels = { [_M.LABEL] = "1", ["io.llmbox.policy"] = tostring(pol.name) }
    for k, v in pairs(opts.labels or {}) do labels[k] = tostring(v) end
    local host = {
        NetworkMode = "none",
        CapDrop = { "ALL" },
        -- for the keeper and the runs' wrappers alone (root's): the programs run as USER with
        -- no capability and no new privileges; kill(2) reaches no further than the container's
        -- own pid namespace, and the ids a wrapper can take are the sandbox user's
        CapAdd = { "KILL", "SETUID", "SETGID" },
        -- Docker takes the profile itself; Podman's API reads it from a file of the engine's host
        SecurityOpt = { "no-new-privileges:true",
            "seccomp=" .. (opts.seccomp_file or _M.profile_json(_M.seccomp_profile(spec.syscalls))) },
        ReadonlyRootfs = true,
        MaskedPaths = _M.MASKED_PATHS,
        Tmpfs = {
            [_M.layout.workspace] = tmpfs(lim.workspace, "1777"),
            [_M.layout.tmp] = tmpfs(lim.tmp, "1777"),
            [_M.PRIVATE] = "rw,exec,nosuid,nodev,size=4194304,mode=0700",
        },
        ShmSize = lim.tmp,
        -- the policy's memory ceiling for the whole container, swap included (no swap)
        Memory = lim.memory,
        MemorySwap = lim.memory,
        -- the runs' processes, plus the container's own (init, the keeper, a run's wrapper)
        PidsLimit = lim.processes + _M.OWN_PROCESSES,
        Init = true,
        Privileged = false,
        AutoRemove = false,
    }
    -- more size-limited tmpfs the caller asked for (runtime = { tmpfs = ... }), the sandbox user's
    for path, bytes in pairs(spec.tmpfs or {}) do host.Tmpfs[path] = tmpfs(bytes, "1777") end
    -- host paths the policy shows read-only, which the caller asked for (runtime = { volumes = ... },
    -- checked by llmbox.backends.runtime): read-only, never propagating mounts back
    -- and the package managers' offline sources the policy names (its own mounts are the host's
    -- system paths, which an image has of its own), where the engine shares this host's files
    local binds = {}
    for _, m in ipairs(spec.volumes or {}) do binds[#binds + 1] = m.src .. ":" .. m.dst .. ":ro,rprivate" end
    if opts.local_engine then
        for _, m in ipairs(spec.mounts or {}) do
            if m.install_source then binds[#binds + 1] = m.src .. ":" .. m.dst .. ":ro,rprivate" end
        end
    end
    if #binds > 0 then host.Binds = binds end
    if opts.kind == "podman" then
        -- Podman's compatible API ignores MaskedPaths: its own security option says the same
        host.SecurityOpt[#host.SecurityOpt + 1] = "mask=" .. table.concat(_M.MASKED_PATHS, ":")
    end
    if lim.cpus then host.NanoCpus = math.floor(lim.cpus * 1e9 + 0.5) end
    local ulimits = {}
    if lim.open_files then
        ulimits[#ulimits + 1] = { Name = "nofile", Soft = lim.open_files, Hard = lim.open_files }
    end
    if opts.nproc then
        -- Podman raises RLIMIT_NPROC to the maximum unless told, which fails where the engine
        -- lacks CAP_SYS_RESOURCE: the caller's hard limit is what the engine's host allows
        ulimits[#ulimits + 1] = { Name = "nproc", Soft = opts.nproc, Hard = opts.nproc }
    end
    if #ulimits > 0 then host.Ulimits = ulimits end
    return {
        Image = opts.image,
        -- the keeper (KEEPER): one shell that waits as long as the container lives; every run
        -- is an exec beside it. It is root's, so the programs (USER, in execs) cannot signal
        -- it, and it stops runs with no new process, so a fork bomb that fills the pids
        -- ceiling cannot keep it out, as it would keep out an exec.
        Entrypoint = { "/bin/sh" },
        Cmd = { "-c", _M.KEEPER },
        User = _M.KEEPER_USER,
        -- no WorkingDir: an engine creates it in the image's root (mode 0755, root's) and copies
        -- that mode onto the tmpfs mounted there; each exec names its own working directory
        Hostname = spec.hostname,
        Env = json.array({}),
        Labels = labels,
        NetworkDisabled = true,
        HostConfig = host,
    }
end

return _M
