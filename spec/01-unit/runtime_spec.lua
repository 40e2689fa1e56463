-- The engine options of the docker and podman backends (runtime = { ... }) against the policy:
-- what tightens is folded into the sandbox spec, what loosens is refused by name.
local runtime = require "llmbox.backends.runtime"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"

local function spec()
    return plan.sandbox(assert(policy.load("default")), nil, { image = "x:1" })
end

describe("runtime engine options #unpriv", function()
    it("folds what tightens the sandbox into its spec", function()
        local base = spec()
        local s = assert(runtime.apply(base, { mem_limit = "256m", pids_limit = 16, cpus = 0.5,
            ulimits = { nofile = 128 }, tmpfs = { ["/scratch"] = "size=8m" }, network_mode = "none", read_only = true,
            privileged = false, cap_drop = { "ALL" }, cap_add = {}, security_opt = { "no-new-privileges:true" },
            user = "1000:1000" }))
        assert.equal(256 * 1024 * 1024, s.limits.memory)
        assert.equal(16, s.limits.processes)
        assert.equal(0.5, s.limits.cpus)
        assert.equal(128, s.limits.open_files)
        assert.same({ ["/scratch"] = 8 * 1024 * 1024 }, s.tmpfs)
        -- the caller's spec is not changed
        assert.equal(assert(policy.load("default")).limits.memory, base.limits.memory)
        assert.is_nil(base.tmpfs)
        assert.equal(base, runtime.apply(base, nil))
    end)

    it("refuses what would loosen it, naming the option and the policy", function()
        local cases = {
            { { privileged = true }, 'runtime.privileged = true is refused: a privileged container' },
            { { network_mode = "host" }, 'runtime.network_mode = "host" is refused' },
            { { network_mode = "bridge" }, 'runtime.network_mode = "bridge" is refused' },
            { { cap_add = { "NET_ADMIN" } }, "runtime.cap_add = NET_ADMIN is refused" },
            { { cap_add = "SYS_ADMIN" }, "runtime.cap_add = SYS_ADMIN is refused" },
            { { volumes = { "/:/host" } }, "runtime.volumes = /:/host is refused: host mounts" },
            { { devices = { "/dev/kvm" } }, "runtime.devices = /dev/kvm is refused" },
            { { read_only = false }, "runtime.read_only = false is refused" },
            { { user = "root" }, 'runtime.user = "root" is refused' },
            { { security_opt = { "seccomp=unconfined" } }, 'runtime.security_opt = "seccomp=unconfined" is refused' },
            { { security_opt = { "apparmor=unconfined" } }, 'runtime.security_opt = "apparmor=unconfined" is refused' },
            { { mem_limit = "4g" }, "runtime.mem_limit = 4G is above policy \"default\"'s memory limit (512M)" },
            { { pids_limit = 100000 }, "runtime.pids_limit = 100000 is above policy \"default\"'s processes limit" },
            { { tmpfs = { ["/sandbox"] = "size=1m" } }, "would cover /sandbox" },
            { { tmpfs = { ["/usr/lib"] = "size=1m" } }, "would cover /usr" },
            { { tmpfs = { ["relative"] = "size=1m" } }, "is not an absolute path" },
            { { tmpfs = { ["/a/../b"] = "size=1m" } }, "is not an absolute path" },
            { { tmpfs = { ["/scratch"] = "rw" } }, "give its size" },
            { { ulimits = { nproc = 10 } }, "only nofile is taken" },
            { { mem_limit = "lots" }, "is not a size" },
            { { shm_size = "1g" }, 'unknown engine option "shm_size"' },
        }
        for _, case in ipairs(cases) do
            local s, err = runtime.apply(spec(), case[1])
            assert.is_nil(s, case[2])
            assert.matches(case[2], err, 1, true)
        end
        -- host mounts: read-only, of what the policy shows read-only, with no symlink out of it
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir " .. dir .. " && ln -s /etc " .. dir .. "/out && mkdir " .. dir .. "/in") == 0)
        finally(function() os.execute("rm -rf " .. dir) end)
        local p = assert(policy.from_table({ extends = "default", filesystem = { ro = { "/usr", dir } } }, "data"))
        local with = plan.sandbox(p, nil, { image = "x:1" })
        local got = assert(runtime.apply(with, { volumes = { dir .. "/in:/data:ro", "/usr/share:/share" } }))
        assert.same({ { src = dir .. "/in", dst = "/data" }, { src = "/usr/share", dst = "/share" } }, got.volumes)
        for _, case in ipairs({
            { dir .. "/out:/data", "/etc is not in it" },
            { dir .. "/in:/data:rw", "host mounts are read-only" },
            { dir .. "/in:/sandbox/d", "would cover /sandbox" },
            { dir .. "/in:/usr/local", "would cover /usr" },
            { dir .. "/in:/", "would cover /" },
            { dir .. "/../x:/data", "without . or .." },
            { dir .. "/missing:/data", "does not exist on this host" },
            { "relative:/data", "both absolute" },
        }) do
            local none, verr = runtime.apply(with, { volumes = { case[1] } })
            assert.is_nil(none, case[1])
            assert.matches(case[2], verr, 1, true)
            assert.matches('(policy "data")', verr, 1, true)
        end
        local _, err = runtime.apply(spec(), { privileged = true })
        assert.matches('(policy "default"; no policy can allow it in this version)', err, 1, true)
    end)
end)
