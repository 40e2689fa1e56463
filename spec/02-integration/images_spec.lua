-- Images on the docker and podman backends: pulled when missing, through the engine, from a real
-- registry (Debian's docker-registry on 127.0.0.1:5055, which spec/support/engines.sh starts),
-- with the engine's progress; pull = "never" and "always"; keep_image = false removes only what
-- the session pulled. The test image is the busybox one, pushed to that registry by Docker.
local llmbox = require "llmbox"
local engine = require "llmbox.engine"
local images = require "llmbox.backends.images"
local busybox = require "spec.support.busybox_image"
local helpers = require "spec.helpers"

local REGISTRY = "localhost:5055"

local function registry_up()
    return os.execute("curl -sf --max-time 2 http://127.0.0.1:5055/v2/ >/dev/null 2>&1") == 0
end

describe("images: split", function()
    it("tells a registry's port from a tag, and takes digests", function()
        assert.same({ "python", "3.12-slim" }, { images.split("python:3.12-slim") })
        assert.same({ "python", "latest" }, { images.split("python") })
        assert.same({ "localhost:5055/a/b", "latest" }, { images.split("localhost:5055/a/b") })
        assert.same({ "localhost:5055/a/b", "1" }, { images.split("localhost:5055/a/b:1") })
        assert.same({ "a/b", "sha256:00ff" }, { images.split("a/b@sha256:00ff") })
    end)
end)

-- The busybox test image in the registry under a name of this run's, pushed by Docker (the
-- registry is shared by both engines).
local pushed
local function push_test_image()
    if pushed ~= nil then return pushed end
    pushed = false
    local d = engine.connect("docker")
    if not d or not registry_up() then return false end
    assert(busybox.ensure(d))
    local repo = REGISTRY .. "/llmbox-spec/busybox"
    local tag = "t" .. tostring(os.time()) .. tostring(math.random(1e6))
    local name, btag = images.split(busybox.IMAGE)
    assert(d:json("POST", ("/images/%s:%s/tag?repo=%s&tag=%s"):format(name, btag, repo, tag)))
    -- X-Registry-Auth: no credentials ("{}")
    local res = assert(d:request("POST", ("/images/%s/push?tag=%s"):format(repo, tag), nil,
        { headers = { ["X-Registry-Auth"] = "e30=" }, timeout_ms = 120000 }))
    assert.equal(200, res.status, res.body)
    assert.is_nil(res.body:find('"error"', 1, true), res.body)
    images.remove(d, repo .. ":" .. tag)
    pushed = repo .. ":" .. tag
    return pushed
end

for _, kind in ipairs({ "docker", "podman" }) do
    describe(("images on the %s backend"):format(kind), function()
        local e, why = engine.connect(kind)

        local function needs_registry()
            local why_not = busybox.unavailable(kind, e, why)
            if not why_not and not registry_up() then
                why_not = "no test registry on 127.0.0.1:5055 (spec/support/engines.sh starts Debian's docker-registry "
                    .. "when it is installed; make test installs it)"
            end
            if not why_not and not push_test_image() then why_not = "the test image could not be pushed" end
            if why_not then pending(why_not) end
            return not why_not
        end

        local function session(image, opts)
            local o = { lang = "shell", backend = kind, image = image }
            for k, v in pairs(opts or {}) do o[k] = v end
            return llmbox.session(o)
        end

        it("pulls a missing image with the engine's progress, and keeps it unless told not to", function()
            if not needs_registry() then return end
            local image = pushed
            images.remove(e, image)
            assert.is_false(images.present(e, image))
            -- pull = "never": refused, saying how to get it
            local s, err = session(image, { pull = "never" })
            assert.is_nil(s)
            assert.matches(('image "%s" is not on the %s engine, and pull = "never"'):format(image, kind), err, 1, true)
            assert.matches(("`%s pull %s`"):format(kind, image), err, 1, true)
            -- missing (the default): pulled, the progress handed over, and the run works
            local docs = {}
            s = assert(session(image, { keep_image = false, on_progress = function(d) docs[#docs + 1] = d end }))
            local r = assert(s:run("echo pulled && id -u"))
            assert.equal("pulled\n1000\n", r.stdout)
            assert.is_true(#docs > 0)
            local statuses = {}
            for _, d in ipairs(docs) do statuses[#statuses + 1] = d.status end
            assert.matches("[Pp]ull", table.concat(statuses, "|"))
            assert.is_true(images.present(e, image))
            s:close()
            -- keep_image = false: what this session pulled is gone with it
            assert.is_false(images.present(e, image))
            -- kept by default
            s = assert(session(image))
            s:close()
            assert.is_true(images.present(e, image))
            -- an image the session did not pull is never removed, keep_image or not
            s = assert(session(image, { keep_image = false }))
            s:close()
            assert.is_true(images.present(e, image))
            images.remove(e, image)
        end)

        it("pulls again with pull = \"always\", and names what the registry lacks in the engine's words", function()
            if not needs_registry() then return end
            local image = pushed
            local s = assert(session(image))
            s:close()
            local docs = {}
            s = assert(session(image, { pull = "always", keep_image = false,
                on_progress = function(d) docs[#docs + 1] = d end }))
            s:close()
            assert.is_true(#docs > 0, "pull = always asked the registry")
            assert.is_true(images.present(e, image)) -- it was there before: not removed
            images.remove(e, image)
            local missing = REGISTRY .. "/llmbox-spec/no-such-image:1"
            local s2, err = session(missing)
            assert.is_nil(s2)
            assert.matches("pulling " .. missing:gsub("%p", "%%%0") .. ": ", err)
            local lower = err:lower()
            assert.is_truthy(lower:find("not found", 1, true) or lower:find("manifest unknown", 1, true), err)
        end)

        it("pulls through the CLI with progress on stderr, and refuses --pull on the native backend", function()
            if not needs_registry() then return end
            local image = pushed
            images.remove(e, image)
            local st, out, err = helpers.cli({ "exec", "-b", kind, "--image", image, "--", "echo", "hi" })
            assert.equal(0, st, err)
            assert.equal("hi\n", out)
            assert.matches("llmbox: pulling: ", err, 1, true)
            images.remove(e, image)
            st, _, err = helpers.cli({ "exec", "-b", kind, "--image", image, "--pull", "never", "--", "true" })
            assert.equal(125, st)
            assert.matches('pull = "never"', err, 1, true)
            st, _, err = helpers.cli({ "exec", "-b", "native", "--pull", "always", "--", "true" })
            assert.equal(125, st)
            assert.matches('backend "native" runs no images: pull applies', err, 1, true)
        end)
    end)
end

-- Images built from a Dockerfile (no registry needed: FROM the busybox test image).
for _, kind in ipairs({ "docker", "podman" }) do
    describe(("images built on the %s backend"):format(kind), function()
        local e, why = engine.connect(kind)

        local function context(dockerfile)
            local dir = helpers.tmpdir()
            helpers.write(dir .. "/Dockerfile", dockerfile)
            helpers.write(dir .. "/greeting.txt", "built by llmbox\n")
            return dir
        end

        -- the engine, with the busybox image the Dockerfiles start FROM
        local function needs_engine()
            local why_not = busybox.unavailable(kind, e, why)
            if why_not then pending(why_not) end
            if not why_not then assert(busybox.ensure(e)) end
            return not why_not
        end

        it("builds from a Dockerfile with its directory as context and no network, and removes an unnamed build", function()
            if not needs_engine() then return end
            if kind == "podman" then
                -- Podman 4.3's build API runs the steps in the host's network namespace
                local s, err = llmbox.session({ backend = kind, lang = "shell",
                    dockerfile = context("FROM " .. busybox.IMAGE .. "\n") .. "/Dockerfile" })
                assert.is_nil(s)
                assert.matches("building from a Dockerfile is refused on podman", err, 1, true)
                assert.matches("host's network namespace", err, 1, true)
                return
            end
            -- /proc/net/dev: the interfaces of the step's own network namespace
            local dir = context("FROM " .. busybox.IMAGE .. "\nCOPY greeting.txt /opt/greeting.txt\n"
                .. "RUN grep -o '^ *[a-z0-9]*:' /proc/net/dev | tr -d ' :' > /opt/nets\n")
            local docs = {}
            local s = assert(llmbox.session({ backend = kind, lang = "shell", dockerfile = dir .. "/Dockerfile",
                on_progress = function(d) docs[#docs + 1] = d end }))
            local image = s.handle.spec.image
            local r = assert(s:run("cat /opt/greeting.txt /opt/nets"))
            s:close()
            assert.equal("built by llmbox\nlo\n", r.stdout)
            local out = {}
            for _, d in ipairs(docs) do out[#out + 1] = d.stream or "" end
            assert.matches("[Ss][Tt][Ee][Pp]", table.concat(out))
            assert.matches("^localhost/llmbox%-build:%x+$", image)
            assert.is_false(images.present(e, image)) -- unnamed: it went with the session
            -- named: kept
            local named = "localhost/llmbox-spec-built:" .. tostring(math.random(1e6))
            s = assert(llmbox.session({ backend = kind, lang = "shell", dockerfile = dir .. "/Dockerfile", image = named }))
            s:close()
            assert.is_true(images.present(e, named))
            images.remove(e, named)
        end)

        -- (podman's builds are refused: the spec above)
        if kind == "docker" then
            it("names the step that failed, in the engine's words", function()
                if not needs_engine() then return end
                local dir = context("FROM " .. busybox.IMAGE .. "\nRUN echo about to fail && false\n")
                local s, err = llmbox.session({ backend = kind, lang = "shell", dockerfile = dir .. "/Dockerfile" })
                assert.is_nil(s)
                assert.matches("building localhost/llmbox%-build:%x+ from .*Dockerfile: ", err)
                assert.matches("false", err, 1, true)
                local _, err2 = llmbox.session({ backend = kind, lang = "shell", dockerfile = dir .. "/NoSuchDockerfile" })
                assert.matches("NoSuchDockerfile", err2, 1, true)
            end)
        end
    end)
end

describe("images: caller mistakes", function()
    it("raises on a pull policy or keep_image it does not know", function()
        assert.has_error(function() llmbox.session({ pull = "sometimes" }) end,
            'session: pull must be "missing" (the default), "never" or "always", got sometimes')
        assert.has_error(function() llmbox.session({ keep_image = "no" }) end, "session: keep_image must be a boolean")
        assert.has_error(function() llmbox.pool({ lang = "python", pull = 1 }) end,
            'pool: pull must be "missing" (the default), "never" or "always", got 1')
        assert.has_error(function() llmbox.session({ dockerfile = 3 }) end, "session: dockerfile must be the path of a Dockerfile")
        local s, err = llmbox.session({ backend = "native", dockerfile = "Dockerfile" })
        assert.is_nil(s)
        assert.matches('backend "native" runs no images: dockerfile applies to backends that do', err, 1, true)
    end)
end)
