-- Committing a container to an image, keeping a container past its session and attaching to it
-- by id, on the docker and podman backends, with the busybox test image: what a user sees
-- through the Lua API and the CLI. A committed image holds the workspace; a session opened from
-- it starts with those files, and a reset goes back to them. An attach is taken only for a
-- container llmbox kept, running, made under the settings the attaching session asks for.
local llmbox = require "llmbox"
local engine = require "llmbox.engine"
local images = require "llmbox.backends.images"
local busybox = require "spec.support.busybox_image"
local helpers = require "spec.helpers"

-- busted keeps one finally per test: a test's cleanups run from one, the last first
local function cleanups()
    local list = {}
    finally(function()
        for i = #list, 1, -1 do pcall(list[i]) end
    end)
    return function(fn) list[#list + 1] = fn end
end

local function unique(name)
    return ("localhost/llmbox-spec-%s:t%d%d"):format(name, os.time(), math.random(1e6))
end

describe("commit and keep on native", function()
    it("are refused, naming the backends that can", function()
        local s = assert(llmbox.session({ lang = "shell" }))
        local img, err = s:commit("localhost/x:1")
        assert.is_nil(img)
        assert.matches('backend "native" cannot commit a sandbox to an image', err, 1, true)
        s:close()
        local s2, err2 = llmbox.session({ lang = "shell", keep = true })
        assert.is_nil(s2)
        assert.matches('backend "native" cannot keep a sandbox past its session or attach to one (keep)', err2, 1, true)
        assert.has_error(function() llmbox.session({ lang = "shell", keep = "yes" }) end,
            "session: keep must be a boolean")
        -- a one-shot run asks before it runs: a commit it cannot make costs no run
        local r, rerr = llmbox.run("echo ran", { lang = "shell", commit = "localhost/x:1" })
        assert.is_nil(r)
        assert.matches("cannot commit", rerr, 1, true)
    end)
end)

for _, kind in ipairs({ "docker", "podman" }) do
    describe(("commit, keep and attach on the %s backend"):format(kind), function()
        local e, why = engine.connect(kind)

        local function ready()
            local why_not = busybox.unavailable(kind, e, why)
            if why_not then
                pending(why_not)
                return false
            end
            assert(busybox.ensure(e))
            return true
        end

        local function session(opts)
            local o = { lang = "shell", backend = kind, image = busybox.IMAGE }
            for k, v in pairs(opts or {}) do o[k] = v end
            return llmbox.session(o)
        end

        local function sh(s, code)
            local r = assert(s:run(code))
            assert.equal(0, r.exit_code, r.stderr)
            return r.stdout
        end

        local function inspect(id)
            return e:json("GET", "/containers/" .. id .. "/json")
        end

        it("commits the workspace into a new image that later sessions and resets start from", function()
            if not ready() then return end
            local later = cleanups()
            local image = unique("commit")
            local s = assert(session())
            sh(s, "mkdir -p d/e && printf hello > d/e/f.txt && chmod 600 d/e/f.txt && ln -s d/e/f.txt link "
                .. "&& printf h > .hidden && printf gone > tmpfile && rm tmpfile && printf t > /tmp/not-kept")
            assert.equal(image, s:commit(image))
            s:close()
            later(function() images.remove(e, image) end)
            -- the image carries none of llmbox's marks: nothing takes it for one of llmbox's containers
            local doc = assert(e:json("GET", "/images/" .. image .. "/json"))
            assert.equal("", doc.Config.Labels["io.llmbox.managed"])
            assert.equal("", doc.Config.Labels["io.llmbox.owner"])
            local s2 = assert(session({ image = image, pull = "never" }))
            later(function() s2:close() end)
            local listing = "ls -A; cat d/e/f.txt; echo; stat -c '%a %u %g' d/e/f.txt d; readlink link; " ..
                "ls /tmp/not-kept 2>&1 | grep -c 'No such'"
            local want = ".hidden\nd\nlink\nhello\n600 1000 1000\n755 1000 1000\nd/e/f.txt\n1\n"
            assert.equal(want, sh(s2, listing))
            -- the files are the sandbox user's: the program changes them
            sh(s2, "printf changed > d/e/f.txt && rm link && printf n > new")
            assert(s2:reset())
            assert.equal(want, sh(s2, listing))
        end)

        it("commits an empty workspace, and refuses a name that is not an image reference", function()
            if not ready() then return end
            local later = cleanups()
            local image = unique("empty")
            local s = assert(session())
            later(function() s:close() end)
            assert.equal(image, s:commit(image))
            later(function() images.remove(e, image) end)
            local s2 = assert(session({ image = image, pull = "never" }))
            assert.equal("", sh(s2, "ls -A"))
            s2:close()
            for _, bad in ipairs({ "BAD IMAGE", "a/../b", "x@sha256:00" }) do
                local img, err = s:commit(bad)
                assert.is_nil(img)
                assert.matches("^commit: ", err)
            end
        end)

        it("keeps a container past close, attaches to it by id, and removes it only when told", function()
            if not ready() then return end
            local later = cleanups()
            local s = assert(session({ keep = true }))
            local id = s:id()
            assert.is_string(id)
            sh(s, "printf kept > state")
            s:close()
            later(function() e:request("DELETE", "/containers/" .. id .. "?force=1") end)
            assert.is_true(assert(inspect(id)).State.Running)
            -- the maintenance leaves a kept container alone, though its maker is gone
            assert(require("llmbox.backends").get(kind).maintain())
            assert.is_true(assert(inspect(id)).State.Running)
            local a = assert(session({ container = id }))
            assert.equal(id, a:id())
            assert.equal("kept", sh(a, "cat state"))
            -- the runs are stopped as in any session: the keeper is there
            local r = assert(a:run("sleep 30", { timeout = 0.5 }))
            assert.is_true(r.timed_out)
            assert.equal("ok\n", sh(a, "echo ok"))
            a:close()
            assert.is_true(assert(inspect(id)).State.Running)
            a = assert(session({ container = id }))
            a:close({ remove = true })
            local gone, _, status = inspect(id)
            assert.is_nil(gone)
            assert.equal(404, status)
        end)

        it("refuses an attach that would run with other settings, or to a container it did not keep", function()
            if not ready() then return end
            local later = cleanups()
            local s = assert(session({ keep = true }))
            local id = s:id()
            s:close()
            later(function() e:request("DELETE", "/containers/" .. id .. "?force=1") end)
            local function refused(opts, pattern)
                local a, err = session(opts)
                assert.is_nil(a)
                assert.matches(pattern, err, 1, true)
            end
            local other = ('container "%s" was made under other settings than this session asks for'):format(id)
            refused({ container = id, policy = "strict" }, other)
            refused({ container = id, runtime = { mem_limit = "64m" } }, other)
            refused({ container = id, image = busybox.PYTHON_IMAGE },
                ('container "%s" runs image %s, not %s'):format(id, busybox.IMAGE, busybox.PYTHON_IMAGE))
            refused({ container = id, pull = "never" }, "container and pull")
            refused({ container = "no-such-container-" .. math.random(1e6) }, "no container")
            refused({ container = "a b" }, "is not a container id or name")
            -- an ordinary session's container goes with it
            local o = assert(session())
            refused({ container = o:id() }, "belongs to another llmbox session")
            o:close()
            -- one llmbox did not make: its isolation is not llmbox's to vouch for
            -- (Podman must be told rlimits at or below its own host's: ENVIRONMENT.md)
            local made = assert(e:json("POST", "/containers/create", { Image = busybox.IMAGE, Cmd = { "sleep", "300" },
                HostConfig = { NetworkMode = "none", Ulimits = { { Name = "nofile", Soft = 1024, Hard = 1024 },
                    { Name = "nproc", Soft = 1024, Hard = 1024 } } } }))
            later(function() e:request("DELETE", "/containers/" .. made.Id .. "?force=1") end)
            assert(e:json("POST", "/containers/" .. made.Id .. "/start"))
            refused({ container = made.Id }, "was not made by llmbox: llmbox cannot vouch for its isolation")
            -- and is never removed by a session
            assert.is_true(assert(inspect(made.Id)).State.Running)
            -- a kept container that stopped has lost its workspace
            assert(e:json("POST", "/containers/" .. id .. "/kill"))
            refused({ container = id }, "is not running")
        end)

        it("keeps, attaches, commits and removes from the command line", function()
            if not ready() then return end
            local later = cleanups()
            local base = { "run", "-b", kind, "-l", "shell" }
            local function cli(...)
                local args = {}
                for _, a in ipairs(base) do args[#args + 1] = a end
                for _, a in ipairs({ ... }) do args[#args + 1] = a end
                return helpers.cli(args)
            end
            local status, out, err = cli("--image", busybox.IMAGE, "--keep", "-c", "printf 1 > a; echo ran")
            assert.equal(0, status, err)
            assert.equal("ran\n", out)
            local id = err:match("kept container (%x+)")
            assert.is_string(id, err)
            later(function() e:request("DELETE", "/containers/" .. id .. "?force=1") end)
            local image = unique("cli")
            later(function() images.remove(e, image) end)
            status, out, err = cli("--container", id, "--commit", image, "--json", "-c", "ls")
            assert.equal(0, status, err)
            local res = require("llmbox.json").decode(out)
            assert.equal("a\n", res.stdout)
            assert.equal(image, res.committed)
            assert.equal(inspect(id).Id, res.container)
            status, out, err = cli("--container", id, "--remove", "-c", "cat a")
            assert.equal(0, status, err)
            assert.equal("1", out)
            assert.is_nil((inspect(id)))
            status, out, err = cli("--image", image, "-c", "cat a")
            assert.equal(0, status, err)
            assert.equal("1", out)
            status, _, err = cli("--remove", "-c", "true")
            assert.equal(125, status)
            assert.matches("--remove goes with --container ID", err, 1, true)
        end)
    end)
end
