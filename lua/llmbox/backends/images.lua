-- Images on the docker and podman engines: what a session's container is made from. An image the
-- engine lacks is pulled through the engine (its registries, mirrors, TLS and credentials, as
-- `docker pull` would), with the engine's progress handed to the caller, unless the caller says
-- pull = "never"; pull = "always" asks the registry even when the engine has it. What llmbox
-- pulled it may remove again (keep_image = false); an image it did not fetch is never removed.
local json = require "llmbox.json"
local util = require "llmbox.util"
local core = require "llmbox.core"

local format, tostring, type, pcall = string.format, tostring, type, pcall

local _M = {}

-- The pull policies, as `docker run --pull` names them.
_M.PULL = { missing = true, never = true, always = true }

-- How long a pull may take: large images over slow links take minutes.
_M.PULL_TIMEOUT_MS = 30 * 60 * 1000

--- images.split(image) -> name, tag: an image reference as the pull call takes it ("tag" is a
--- digest for name@sha256:...; "latest" when none is named). A registry's port is not a tag.
function _M.split(image)
    local name, digest = image:match("^(.-)@(.+)$")
    if name then return name, digest end
    local last_slash = image:match("^.*()/") or 0
    local colon = image:match("^.*():")
    if colon and colon > last_slash then return image:sub(1, colon - 1), image:sub(colon + 1) end
    return image, "latest"
end

--- images.is_reference(image) -> boolean: an image reference ("name[:tag][@digest]", registry
--- and path parts); it goes into request paths, so nothing else may pass
function _M.is_reference(image)
    return type(image) == "string" and #image <= 255 and image:match("^[%w][%w%._/:@%-]*$") ~= nil
        and not image:find("..", 1, true) and not image:find("//", 1, true)
end

--- images.commit_target(image) -> true | nil, err: may a commit be saved under this name
function _M.commit_target(image)
    if not _M.is_reference(image) then
        return nil, format("commit: %q is not an image reference (name[:tag])", tostring(image))
    end
    if image:find("@", 1, true) then return nil, "commit: name the image by a tag, not a digest" end
    return true
end

--- images.present(e, image) -> true | false | nil, err: does engine e have the image
function _M.present(e, image)
    local res, err, code = e:request("GET", "/images/" .. image .. "/json")
    if not res then return nil, err, code end
    if res.status == 200 then return true end
    if res.status == 404 then return false end
    return nil, format("asking the engine for image %s: HTTP %d", image, res.status)
end

-- The engine's words in an error body ({"message": ...}), or the body itself.
local function message(body)
    local ok, doc = pcall(json.decode, body or "")
    if ok and type(doc) == "table" and type(doc.message) == "string" then return doc.message end
    return ((body or ""):gsub("%s+$", ""):sub(1, 300))
end

-- A call whose answer streams one JSON document per line (a pull's progress, a build's output):
-- on_progress(doc) gets each. A failure comes either as an HTTP error or, once the stream has
-- begun, as a document with "error" (the HTTP status is 200 by then): both are the call's error,
-- in the engine's words. -> true | nil, err, code
local function stream_call(e, method, path, body, headers, on_progress)
    local pending, all, failure = "", {}, nil
    local function line(l)
        local ok, doc = pcall(json.decode, l)
        if not ok or type(doc) ~= "table" then return end
        if doc.error or doc.errorDetail then
            failure = failure or tostring(doc.error or (type(doc.errorDetail) == "table" and doc.errorDetail.message))
        elseif on_progress then
            on_progress(doc)
        end
    end
    local res, err, code = e:request(method, path, body, {
        timeout_ms = _M.PULL_TIMEOUT_MS, headers = headers,
        on_data = function(chunk)
            all[#all + 1] = chunk
            pending = pending .. chunk
            for l, rest in pending:gmatch("([^\n]*)\n()") do
                line(l)
                pending = pending:sub(rest)
            end
        end,
    })
    if not res then return nil, err, code end
    if #pending > 0 then line(pending) end
    if res.status ~= 200 then
        return nil, format("%s (HTTP %d from the engine)", message(table.concat(all) .. (res.body or "")), res.status),
            res.status
    end
    if failure then return nil, (failure:gsub("%s+$", "")) end
    return true
end

--- images.pull(e, image [, on_progress]) -> true | nil, err: pulls through engine e; on_progress
--- gets the engine's progress documents ({"status", "id", "progress"})
function _M.pull(e, image, on_progress)
    local name, tag = _M.split(image)
    local res, err, code = stream_call(e, "POST", format("/images/create?fromImage=%s&tag=%s", util.url_encode(name),
        util.url_encode(tag)), nil, nil, on_progress)
    if not res then return nil, format("pulling %s: %s", image, tostring(err)), code end
    -- an engine that ended the stream without an error, and without the image, is not believed
    local there, perr = _M.present(e, image)
    if there == nil then return nil, perr end
    if not there then return nil, format("pulling %s: the engine ended the pull, but has no such image", image) end
    return true
end

--- images.ensure(e, image, opts) -> pulled (boolean) | nil, err: makes sure engine e has image,
--- as opts.pull says ("missing" by default); opts.on_progress gets the pull's progress. Returns
--- whether this call pulled it (so that the caller may remove it again).
function _M.ensure(e, image, opts)
    opts = opts or {}
    local policy = opts.pull or "missing"
    local there, err, code = _M.present(e, image)
    if there == nil then return nil, err, code end
    if there and policy ~= "always" then return false end
    if not there and policy == "never" then
        return nil, format("image %q is not on the %s engine, and pull = \"never\": pull it first (`%s pull %s`), "
            .. "or allow llmbox to (pull = \"missing\", --pull missing)", image, e.endpoint.kind, e.endpoint.kind, image)
    end
    local ok
    ok, err, code = _M.pull(e, image, opts.on_progress)
    if not ok then return nil, err, code end
    return not there
end

--- images.build(e, dockerfile, tag [, on_progress]) -> true | nil, err: builds the image tag
--- from a Dockerfile on this host, with the Dockerfile's directory as the build context (sent
--- as the copies' tar writer makes it: links and special files are left out). Its steps get no
--- network (networkmode=none), as no sandbox has one; intermediate containers are removed.
--- on_progress(doc) gets the engine's output ({"stream": "Step 1/3 : ..."}); a failed step is
--- the error, in the engine's words.
function _M.build(e, dockerfile, tag, on_progress)
    local dir, name = dockerfile:match("^(.*)/([^/]+)$")
    if not dir then dir, name = ".", dockerfile end
    if dir == "" then dir = "/" end
    local context, err, code = core.tar_host(dir, ".")
    if not context then return nil, format("reading the build context %s: %s", dir, tostring(err)), code end
    local res
    res, err, code = stream_call(e, "POST", format("/build?t=%s&dockerfile=%s&networkmode=none&rm=1&forcerm=1",
        util.url_encode(tag), util.url_encode(name)), context, { ["Content-Type"] = "application/x-tar" }, on_progress)
    if not res then return nil, format("building %s from %s: %s", tag, dockerfile, tostring(err)), code end
    local there, perr = _M.present(e, tag)
    if there == nil then return nil, perr end
    if not there then return nil, format("building %s from %s: the engine ended the build without the image", tag,
        dockerfile) end
    return true
end

--- images.remove(e, image) -> true | nil, err: removes an image llmbox pulled; one a container
--- still uses (another session's) stays, and that is not an error
function _M.remove(e, image)
    local res, err, code = e:request("DELETE", "/images/" .. image)
    if not res then return nil, err, code end
    if res.status == 200 or res.status == 404 or res.status == 409 then return true end
    return nil, format("removing image %s: %s (HTTP %d)", image, message(res.body), res.status)
end

return _M
