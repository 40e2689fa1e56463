-- What the Kubernetes API and a pod's status say, as errors a user can act on (issue 17): the
-- API's Status objects (RBAC refusals, quotas, names taken, pods gone), and the states in which a
-- pod will never become ready (its image cannot be pulled, it cannot be scheduled, it was evicted
-- or deleted), each naming the cause; and which of llmbox's pods a crashed caller left behind.
local json = require "llmbox.json"
local pod = require "llmbox.k8s.pod"

local type, ipairs, tostring, tonumber, format = type, ipairs, tostring, tonumber, string.format

local _M = {}

--- status.api_error(code, body, doing) -> message: an API answer other than 2xx, explained.
--- doing: what llmbox was doing ("creating pod llmbox-abc in namespace x").
function _M.api_error(code, body, doing)
    local st = type(body) == "string" and json.decode(body) or body
    local msg = type(st) == "table" and type(st.message) == "string" and st.message or nil
    local reason = type(st) == "table" and st.reason or nil
    local what
    if code == 401 then
        what = "the API server did not accept llmbox's credentials (401 Unauthorized): check the kubeconfig's "
            .. "token or client certificate"
    elseif code == 403 and msg and msg:find("exceeded quota", 1, true) then
        what = "the namespace's resource quota is used up (403): " .. msg
    elseif code == 403 then
        what = "refused by the cluster's RBAC (403 Forbidden): " .. (msg or "no reason given")
            .. "; llmbox needs create, get, list, watch and delete on pods and create on pods/exec in the namespace"
    elseif code == 404 then
        what = "not found (404): " .. (msg or "the object or the namespace does not exist")
    elseif code == 409 then
        what = "already exists (409): " .. (msg or "the name is taken")
    elseif code == 422 then
        what = "the API server refused the pod (422 Invalid): " .. (msg or "no reason given")
    elseif code == 429 then
        what = "the API server is throttling llmbox (429 Too Many Requests): try again later"
    else
        what = format("the API server answered %s%s: %s", tostring(code), reason and (" " .. tostring(reason)) or "",
            msg or "no message")
    end
    return doing and (doing .. ": " .. what) or what
end

local function condition(p, kind)
    for _, c in ipairs(p.status and p.status.conditions or {}) do
        if c.type == kind then return c end
    end
end

--- status.pod_state(p) -> "ready" | "waiting" | "failed", why: whether a pod (the API's JSON,
--- decoded) can be used, may still become usable, or never will; why names the cause.
function _M.pod_state(p)
    local st = p.status or {}
    local name = p.metadata and p.metadata.name or "?"
    if p.metadata and p.metadata.deletionTimestamp then
        return "failed", format("pod %s is being deleted", name)
    end
    if st.reason == "Evicted" then
        return "failed", format("pod %s was evicted by its node: %s", name, tostring(st.message or "no message"))
    end
    if st.phase == "Failed" or st.phase == "Succeeded" then
        return "failed", format("pod %s has ended (phase %s)%s", name, st.phase, st.message and (": " .. st.message) or "")
    end
    for _, cs in ipairs(st.containerStatuses or {}) do
        local w = cs.state and cs.state.waiting
        if w and (w.reason == "ErrImagePull" or w.reason == "ImagePullBackOff" or w.reason == "InvalidImageName"
            or w.reason == "ErrImageNeverPull") then
            return "failed", format("pod %s: its image %s cannot be pulled (%s): %s", name, tostring(cs.image),
                w.reason, tostring(w.message or "no message"))
        end
        if w and (w.reason == "CreateContainerConfigError" or w.reason == "CreateContainerError"
            or w.reason == "CrashLoopBackOff") then
            return "failed", format("pod %s: its container cannot start (%s): %s", name, w.reason,
                tostring(w.message or "no message"))
        end
        local t = cs.state and cs.state.terminated
        if t then
            return "failed", format("pod %s: its container ended (exit %s, %s)", name, tostring(t.exitCode),
                tostring(t.reason or "no reason"))
        end
    end
    local scheduled = condition(p, "PodScheduled")
    if scheduled and scheduled.status == "False" and scheduled.reason == "Unschedulable" then
        -- (the scheduler may yet find room: the caller's readiness timeout decides)
        return "waiting", format("pod %s cannot be scheduled yet: %s", name, tostring(scheduled.message))
    end
    local ready = condition(p, "Ready")
    if st.phase == "Running" and ready and ready.status == "True" then return "ready" end
    return "waiting", format("pod %s is %s", name, tostring(st.phase or "Pending"))
end

--- status.leftovers(list, now, max_age) -> { name, ... }: llmbox's pods (by label) older than
--- max_age seconds, by their creation label (a PodList, decoded): what a crashed caller left
function _M.leftovers(list, now, max_age)
    local out = {}
    for _, p in ipairs(list.items or {}) do
        local labels = p.metadata and p.metadata.labels or {}
        local created = tonumber(labels[pod.LABEL_CREATED])
        if labels[pod.LABEL_MANAGED] == "llmbox" and created and now - created > max_age then
            out[#out + 1] = p.metadata.name
        end
    end
    table.sort(out)
    return out
end

return _M
