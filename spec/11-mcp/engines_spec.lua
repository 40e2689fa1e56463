-- `llmbox mcp` with BACKEND=docker and BACKEND=podman, as the seed's users configure it: the
-- tools run the code in a container of the engine (here the Python test image, named by
-- LLMBOX_IMAGE: no registry is reachable). Real engines, a real stdio client.
local engine = require "llmbox.engine"
local images = require "spec.support.busybox_image"
local raw = require "support.mcp.raw"

for _, kind in ipairs({ "docker", "podman" }) do
    describe(("mcp with BACKEND=%s"):format(kind), function()
        local e, why = engine.connect(kind)

        it("runs execute_code in a container of that engine, with the SANDBOX_* limits", function()
            local why_not = images.unavailable(kind, e, why)
            if why_not then
                pending(why_not)
                return
            end
            assert(images.ensure_python(e))
            local c = raw.start({ BACKEND = kind, LLMBOX_IMAGE = images.PYTHON_IMAGE, SANDBOX_MEMORY = "256m",
                LLMBOX_MCP_WARM = "0" })
            finally(function() c:close() end)
            assert.equal("2025-11-25", c:init().result.protocolVersion)
            -- the container's init is the engine's (docker-init or catatonit), and its memory
            -- ceiling is SANDBOX_MEMORY's
            local r = c:request(2, "tools/call", { name = "execute_code", arguments = { language = "python",
                code = "import os\nprint(open('/proc/1/cmdline').read().split('\\0')[0])\nprint(os.getuid())\n"
                    .. "for f in ('/sys/fs/cgroup/memory/memory.limit_in_bytes', '/sys/fs/cgroup/memory.max'):\n"
                    .. "    if os.path.exists(f): print(open(f).read().strip())" } })
            assert.is_table(r.result, r.error and r.error.message)
            local out = r.result.structuredContent
            assert.equal(0, out.exit_code, out.stderr)
            assert.matches("init\n1000\n", out.stdout) -- /sbin/docker-init, /usr/libexec/podman/catatonit
            assert.matches(tostring(256 * 1024 * 1024), out.stdout, 1, true)
            local _, stderr = c:close()
            assert.matches("backend=" .. kind, stderr, 1, true)
        end)

        it("keeps an interactive session's interpreter in a container of that engine", function()
            local ready, why_not = images.python_engine(kind)
            if not ready then
                pending(why_not)
                return
            end
            local c = raw.start({ BACKEND = kind, LLMBOX_IMAGE = images.PYTHON_IMAGE, LLMBOX_MCP_WARM = "0" })
            finally(function() c:close() end)
            c:init()
            local r = c:request(2, "tools/call", { name = "create_session",
                arguments = { language = "python", interactive = true } })
            assert.is_table(r.result, r.error and r.error.message)
            local sid = r.result.structuredContent.session_id
            assert.is_true(r.result.structuredContent.interactive)
            local function cell(id, code, timeout)
                local res = c:request(id, "tools/call", { name = "run_in_session",
                    arguments = { session_id = sid, code = code, timeout = timeout } })
                assert.is_table(res.result, res.error and res.error.message)
                return res.result.structuredContent
            end
            assert.equal(0, cell(3, "n = 41").exit_code)
            local out = cell(4, "import time\ntime.sleep(20)", 0.5)
            assert.equal("timeout", out.limit)
            assert.is_false(out.state_lost)
            out = cell(5, "n + 1")
            assert.equal("42", out.value)
            assert.equal(3, out.cell)
        end)
    end)
end
