-- The first stage of a run (admit -> plan -> execute -> collect -> render): what the policy says of
-- a request before any sandbox exists. Code that an enforcing policy refuses, and libraries the
-- policy does not allow or names that are not package names, never cost a sandbox.
--
-- An admission is a table only this module makes (kept in a weak set): Session:run skips the
-- checks for the exact code, recipe and policy it was given for, and checks itself otherwise, so
-- a caller can neither forge one nor use one for other code.
local checks = require "llmbox.checks"
local artifacts = require "llmbox.artifacts"

local type, ipairs, tostring, setmetatable = type, ipairs, tostring, setmetatable
local format, concat = string.format, table.concat

local _M = { _VERSION = "0.1.0" }

local issued = setmetatable({}, { __mode = "k" })

--- "rule (severity, line N): message; ..." for refusals and warnings.
function _M.describe_violations(report)
    local parts = {}
    for _, v in ipairs(report.violations) do
        parts[#parts + 1] = format("%s (%s, line %s): %s", v.rule, v.severity, tostring(v.line or "?"), v.message or "")
    end
    return concat(parts, "; ")
end

--- admit.libraries(packages, recipe, policy) -> true | nil, err: may these be installed at all?
function _M.libraries(packages, recipe, policy)
    if not recipe then return nil, "this session has no language to install libraries for" end
    if not policy.libraries.allow then
        return nil, format("policy %q does not allow library installs (libraries.allow = false)", policy.name)
    end
    if not recipe.install then
        return nil, format("installing libraries is not supported for %s", recipe.name)
    end
    for i, p in ipairs(packages) do
        local ok, why = artifacts.valid_package_name(p)
        if not ok then return nil, format("install: package %d (%q) %s", i, tostring(p), why) end
    end
    return true
end

--- admit.run(code, recipe, policy [, libraries]) -> admission | nil, err [, report]
--- admission.report holds the checks' findings (warnings a warning policy let through).
function _M.run(code, recipe, policy, libraries)
    local report = checks.check(code, recipe.checks or recipe.name, policy.checks)
    if report.blocked then
        return nil, format("refused by policy %q: %s", policy.name, _M.describe_violations(report)), report
    end
    if type(libraries) == "table" and #libraries > 0 then
        local ok, err = _M.libraries(libraries, recipe, policy)
        if not ok then return nil, err end
    end
    local a = { report = report, code = code, recipe = recipe, policy = policy }
    issued[a] = true
    return a
end

--- admit.covers(admission, code, recipe, policy) -> true when the admission was made here for them
function _M.covers(a, code, recipe, policy)
    return a ~= nil and issued[a] == true and a.code == code and a.recipe == recipe and a.policy == policy
end

return _M
