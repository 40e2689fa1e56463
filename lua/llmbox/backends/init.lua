-- Backend registry: name -> driver module. Every driver implements the same contract
--   driver.open(policy, recipe) -> handle | nil, err
--   handle:run{ argv, env, cwd, stdin, files, limits, on_stdout, on_stderr } -> result | nil, err
--   handle:copy_in(host_path, path) / handle:copy_out(path, host_path, max) -> true | nil, err
--   handle:close()
-- and declares capabilities (driver.capabilities), so callers ask instead of guess.
local _M = { _VERSION = "0.1.0" }

-- Drivers that exist as names; the ones not built yet say so instead of pretending.
local known = {
    native = "llmbox.backends.native",
}
local planned = { docker = true, podman = true, kubernetes = true, bubblewrap = true, nsjail = true }

function _M.get(name)
    if type(name) ~= "string" then error("backend name expected, got " .. type(name), 2) end
    local mod = known[name]
    if not mod then
        if planned[name] then
            return nil, ("backend %q is not available in this version of llmbox (available: native)"):format(name)
        end
        return nil, ("unknown backend %q (available: native)"):format(name)
    end
    return require(mod)
end

function _M.names()
    local t = {}
    for k in pairs(known) do t[#t + 1] = k end
    table.sort(t)
    return t
end

return _M
