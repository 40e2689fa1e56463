-- The container engines' translation of the neutral sandbox spec (llmbox.backends.container):
-- the ContainerCreate body and the seccomp profile, checked without an engine. What the real
-- engines make of it is in spec/02-integration/engine_spec.lua.
local container = require "llmbox.backends.container"
local core = require "llmbox.core"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"

local function spec_for(name)
    return plan.sandbox(assert(policy.load(name)), nil)
end

-- The rules of a profile that name `syscall`.
local function rules_for(profile, syscall)
    local out = {}
    for _, r in ipairs(profile.syscalls) do
        for _, n in ipairs(r.names) do
            if n == syscall then out[#out + 1] = r end
        end
    end
    return out
end

describe("container create body #unpriv", function()
    local p = assert(policy.load("default"))

    it("mounts no host path but the caller's checked volumes and, on a local engine, the offline sources", function()
        local s = spec_for("default")
        assert.is_nil(assert(container.create_body(s, { image = "img:1", local_engine = true })).HostConfig.Binds)
        s.mounts[#s.mounts + 1] = { src = "/srv/wheels", dst = "/srv/wheels", install_source = true }
        s.volumes = { { src = "/srv/data", dst = "/data" } }
        assert.same({ "/srv/data:/data:ro,rprivate", "/srv/wheels:/srv/wheels:ro,rprivate" },
            assert(container.create_body(s, { image = "img:1", local_engine = true })).HostConfig.Binds)
        -- a remote engine's paths are another machine's
        assert.same({ "/srv/data:/data:ro,rprivate" }, assert(container.create_body(s, { image = "img:1" })).HostConfig.Binds)
    end)

    it("is hardened by default, with the policy's sizes and ceilings", function()
        local body = assert(container.create_body(spec_for("default"), { image = "img:1" }))
        local h = body.HostConfig
        assert.equal("img:1", body.Image)
        assert.equal("0:0", body.User) -- init and the keeper; every run is an exec as 1000:1000
        assert.is_nil(body.WorkingDir) -- see create_body: it would make the workspace root's
        assert.is_true(body.NetworkDisabled)
        assert.equal("none", h.NetworkMode)
        assert.same({ "ALL" }, h.CapDrop)
        assert.equal("no-new-privileges:true", h.SecurityOpt[1])
        assert.matches("^seccomp={", h.SecurityOpt[2])
        assert.is_true(h.ReadonlyRootfs)
        -- /sys hidden but for the container's cgroups; Podman takes it as a security option
        assert.same(container.MASKED_PATHS, h.MaskedPaths)
        assert.is_nil(h.MaskedPaths[1]:match("cgroup"))
        local podman = assert(container.create_body(spec_for("default"), { image = "img:1", kind = "podman" }))
        assert.equal("mask=" .. table.concat(container.MASKED_PATHS, ":"), podman.HostConfig.SecurityOpt[3])
        assert.is_false(h.Privileged)
        assert.is_true(h.Init)
        assert.equal(("rw,exec,nosuid,nodev,size=%d,mode=1777"):format(p.limits.workspace), h.Tmpfs["/sandbox"])
        assert.equal(("rw,exec,nosuid,nodev,size=%d,mode=1777"):format(p.limits.tmp), h.Tmpfs["/tmp"])
        assert.equal(p.limits.memory, h.Memory)
        assert.equal(p.limits.memory, h.MemorySwap) -- no swap beyond the ceiling
        -- root's own tmpfs (the helper, the keeper's FIFO, a run's counts), out of the programs' sight
        assert.equal("rw,exec,nosuid,nodev,size=4194304,mode=0700", h.Tmpfs["/.llmbox"])
        assert.equal(p.limits.processes + 5, h.PidsLimit) -- init, the keeper, its sleep, the wrapper, the helper
        assert.same({ { Name = "nofile", Soft = p.limits.open_files, Hard = p.limits.open_files } }, h.Ulimits)
        assert.equal("1", body.Labels["io.llmbox.managed"])
        assert.equal("default", body.Labels["io.llmbox.policy"])
        assert.is_nil(h.Binds)
        assert.is_nil(h.NanoCpus)
    end)

    it("sets a CPU quota when the policy has one, and keeps the caller's labels beside its own", function()
        local spec = spec_for("default")
        spec.limits.cpus = 0.5
        local body = assert(container.create_body(spec, { image = "img:1", labels = { team = "a" } }))
        assert.equal(500000000, body.HostConfig.NanoCpus)
        assert.equal("a", body.Labels.team)
        assert.equal("1", body.Labels["io.llmbox.managed"])
    end)

    it("refuses a network it cannot give, and a missing image, saying which", function()
        local spec = spec_for("default")
        spec.network = { mode = "egress" }
        local body, err = container.create_body(spec, { image = "img:1" })
        assert.is_nil(body)
        assert.equal('policy "default" asks for network mode "egress"; the container backends provide only '
            .. '"none" (no network at all): egress is built for the native and bubblewrap backends so far (-b native)', err)
        assert.has_error(function() container.create_body(spec_for("default"), {}) end,
            "create_body: opts.image is required")
    end)
end)

describe("container seccomp profile #unpriv", function()
    it("refuses the policy's deny list with EPERM, and clone3 with ENOSYS (libc falls back to clone)", function()
        local sc = spec_for("default").syscalls
        local prof = container.seccomp_profile(sc)
        assert.equal("SCMP_ACT_ALLOW", prof.defaultAction)
        local mount = rules_for(prof, "mount")
        assert.equal(1, #mount)
        assert.equal("SCMP_ACT_ERRNO", mount[1].action)
        assert.equal(1, mount[1].errnoRet)
        for _, name in ipairs(sc.deny) do assert.equal(1, #rules_for(prof, name), name) end
        local clone3 = rules_for(prof, "clone3")
        assert.equal(38, clone3[1].errnoRet)
    end)

    it("refuses every namespace flag of clone, one rule per flag", function()
        local prof = container.seccomp_profile(spec_for("default").syscalls)
        local clone = rules_for(prof, "clone")
        assert.equal(8, #clone)
        for _, r in ipairs(clone) do
            assert.equal("SCMP_CMP_MASKED_EQ", r.args[1].op)
            assert.equal(0, r.args[1].index)
            assert.equal(r.args[1].value, r.args[1].valueTwo)
        end
    end)

    it("refuses socket families the policy does not name, as native's filter does", function()
        local sc = spec_for("default").syscalls
        assert.same({ "unix", "inet", "inet6", "netlink_route" }, sc.socket_families)
        local socket = rules_for(container.seccomp_profile(sc), "socket")
        local refused, route_only, beyond = {}, false, false
        for _, r in ipairs(socket) do
            assert.equal(1, r.errnoRet)
            if #r.args == 2 then
                route_only = r.args[1].value == 16 and r.args[2].index == 2 and r.args[2].op == "SCMP_CMP_NE"
            elseif r.args[1].op == "SCMP_CMP_GE" then
                beyond = r.args[1].value == core.AF_MAX
            else
                refused[r.args[1].value] = true
            end
        end
        assert.is_true(refused[40]) -- vsock
        assert.is_true(refused[38]) -- alg
        for _, family in ipairs({ 1, 2, 10, 16 }) do assert.is_nil(refused[family], family) end
        assert.is_true(route_only)
        assert.is_true(beyond)
        -- an allow list that lists socket allows the named families by the same tests
        local allow = container.seccomp_profile({ default = "deny", action = "errno", allow = { "socket", "read" },
            socket_families = { "unix", "netlink_route" } })
        local allowed = {}
        for _, r in ipairs(rules_for(allow, "socket")) do
            if r.action == "SCMP_ACT_ALLOW" then allowed[#allowed + 1] = r.args[1].value .. "/" .. #r.args end
        end
        assert.same({ "1/1", "16/2" }, allowed)
    end)

    it("kills instead when the policy says kill, and refuses the policy's ioctls by number", function()
        local prof = container.seccomp_profile({ default = "allow", action = "kill", deny = { "ptrace" },
            deny_ioctls = { "TIOCSTI" } })
        assert.equal("SCMP_ACT_KILL_PROCESS", rules_for(prof, "ptrace")[1].action)
        local ioctl = rules_for(prof, "ioctl")
        assert.equal(1, #ioctl)
        assert.equal(core.ioctl_number("TIOCSTI"), ioctl[1].args[1].valueTwo)
        assert.equal(1, ioctl[1].args[1].index)
    end)

    it("writes 64-bit masks as bare JSON numbers the engines read as uint64", function()
        local prof = container.seccomp_profile({ default = "deny", action = "errno", allow = { "ioctl", "read" },
            deny_ioctls = { "TIOCSTI" } })
        local text = container.profile_json(prof)
        assert.matches('"value":18446744073709551614,"valueTwo":21520', text, 1, true) -- 0x5410-0x5411
        assert.matches('"value":4294967295', text, 1, true)
        assert.is_nil(text:find('"value":"', 1, true))
    end)

    it("allows an allow-list's ioctls by blocks that never overlap a denied request", function()
        local prof = container.seccomp_profile({ default = "deny", action = "errno", allow = { "ioctl", "read" },
            deny_ioctls = { "TIOCSTI", "TIOCLINUX" } })
        local denied = { core.ioctl_number("TIOCSTI"), core.ioctl_number("TIOCLINUX") }
        local covered = 0
        for _, r in ipairs(rules_for(prof, "ioctl")) do
            if r.action == "SCMP_ACT_ALLOW" then
                local a = r.args[1]
                local mask = 0ULL -- a string of digits: a uint64 beyond a double's exact integers
                for c in a.value:gmatch("%d") do mask = mask * 10 + (c:byte() - 48) end
                -- the block's size: the mask's low zero bits
                local size = tonumber(bit.band(bit.bnot(mask), 0xffffffffULL)) + 1
                for _, d in ipairs(denied) do
                    assert.is_false(d >= a.valueTwo and d < a.valueTwo + size, ("block %x+%x holds %x"):format(a.valueTwo, size, d))
                end
                covered = covered + size
            end
        end
        assert.equal(2 ^ 32 - 2, covered) -- every other 32-bit request
    end)

    it("turns an allow list (default deny) into ENOSYS for the rest, as native does", function()
        local sc = spec_for("strict").syscalls
        assert.equal("deny", sc.default)
        local prof = container.seccomp_profile(sc)
        assert.equal("SCMP_ACT_ERRNO", prof.defaultAction)
        assert.equal(38, prof.defaultErrnoRet)
        local allowed = rules_for(prof, "read")
        assert.equal("SCMP_ACT_ALLOW", allowed[1].action)
        -- clone3: ENOSYS by name (libc falls back to clone), not left to the default, which
        -- dockerd 20.10 answers with EPERM
        local c3 = rules_for(prof, "clone3")
        assert.equal(1, #c3)
        assert.equal(38, c3[1].errnoRet)
        -- and by name, for engines that ignore defaultErrnoRet (dockerd 20.10 answers EPERM)
        for _, name in ipairs({ "keyctl", "mount", "unshare", "setns", "bpf" }) do
            local r = rules_for(prof, name)
            assert.equal(1, #r, name)
            assert.equal("SCMP_ACT_ERRNO", r[1].action)
            assert.equal(38, r[1].errnoRet)
        end
        -- clone: allowed only without namespace flags, after the refusals
        local clone = rules_for(prof, "clone")
        assert.equal(9, #clone)
        assert.equal("SCMP_ACT_ALLOW", clone[9].action)
        assert.equal(0, clone[9].args[1].valueTwo)
    end)
end)

describe("engine exec streams #unpriv", function()
    local engine = require "llmbox.engine"
    local function frame(stream, payload)
        local n = #payload
        return string.char(stream, 0, 0, 0, math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
            math.floor(n / 256) % 256, n % 256) .. payload
    end

    it("splits stdout and stderr frames, and keeps an incomplete frame for the next chunk", function()
        local big = string.rep("x", 70000)
        local data = frame(1, "out1\n") .. frame(2, "err\n") .. frame(1, big) .. frame(1, "tail")
        local out, err, rest = engine.demux(data)
        assert.equal("out1\n" .. big .. "tail", out)
        assert.equal("err\n", err)
        assert.equal("", rest)
        out, err, rest = engine.demux(data:sub(1, 20))
        assert.equal("", err)
        assert.equal("out1\n", out)
        assert.equal(data:sub(14, 20), rest)
    end)
end)
