-- A program that embeds llmbox (the daemon, a gateway) opens and closes many container sessions:
-- each must give its connections back when it closes, not when the garbage collector next runs.
local llmbox = require "llmbox"
local images = require "spec.support.busybox_image"
local ffi = require "ffi"
pcall(ffi.cdef, "int getpid(void);")

local function sockets()
    local p = io.popen("ls -l /proc/" .. ffi.C.getpid() .. "/fd 2>/dev/null | grep -c 'socket:'")
    local n = tonumber(p:read("*a"))
    p:close()
    return n
end

for _, kind in ipairs({ "docker", "podman" }) do
    describe("container sessions on " .. kind, function()
        it("leave no connection open once closed", function()
            local ready, why_not = images.python_engine(kind)
            if not ready then
                pending(why_not)
                return
            end
            collectgarbage()
            collectgarbage("stop") -- what is open must be closed by close(), not collected
            finally(function() collectgarbage("restart") end)
            local before = sockets()
            for _ = 1, 3 do
                local s = assert(llmbox.session({ lang = "python", backend = kind, image = images.PYTHON_IMAGE }))
                assert.equal("1\n", assert(s:run("print(1)")).stdout)
                s:close()
            end
            assert.equal(before, sockets())
        end)
    end)
end
