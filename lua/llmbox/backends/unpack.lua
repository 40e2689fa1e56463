-- Images without a daemon: an image archive (docker save's, an OCI layout, or an archive of one)
-- unpacked into a root filesystem that the native backend runs (rootfs), in a content-addressed
-- cache. The transports are the names skopeo and podman use:
--
--   dir:DIR               a root filesystem already unpacked (used as it is)
--   docker-archive:PATH   `docker save` / `podman save` output (manifest.json, layer tars)
--   oci-archive:PATH      a tar of an OCI image layout
--   oci:DIR               an OCI image layout (index.json, blobs/sha256/...)
--
-- Archives are untrusted input. The outer archive is unpacked by the same code as the layers
-- (runtime/layer.c: nothing lands outside the directory, no link is followed, devices are left
-- out); every name the image's JSON gives is resolved inside that directory; OCI blobs must
-- match their digests; the layers are applied in order, whiteouts honoured, into a directory of
-- the cache's own, renamed into place only once every layer applied: a failed unpack leaves the
-- cache as it was. The cache key is a digest over the configuration's and every layer's digests
-- (each taken from the bytes, never from what the archive says of itself), so the same image is
-- unpacked once however it was saved, and an archive that borrows another image's
-- configuration with other layers gets a directory of its own, not the other's.
local core = require "llmbox.core"
local json = require "llmbox.json"
local util = require "llmbox.util"

local format, type, ipairs, tostring = string.format, type, ipairs, tostring

local _M = {}

-- The bytes an image may take unpacked, its archive, and its JSON documents.
_M.MAX_BYTES = 8 * 1024 * 1024 * 1024
_M.MAX_JSON = 4 * 1024 * 1024

_M.TRANSPORTS = { dir = true, ["docker-archive"] = true, ["oci-archive"] = true, oci = true }

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- unpack.cache_dir() -> the directory of unpacked images: $LLMBOX_IMAGE_CACHE, else
--- /var/cache/llmbox/images as root, else $XDG_CACHE_HOME/llmbox/images (~/.cache)
function _M.cache_dir()
    local env = os.getenv("LLMBOX_IMAGE_CACHE")
    if env and env ~= "" then return env end
    local ffi = require "ffi"
    pcall(ffi.cdef, "unsigned int geteuid(void);")
    if ffi.C.geteuid() == 0 then return "/var/cache/llmbox/images" end
    local xdg = os.getenv("XDG_CACHE_HOME")
    return ((xdg and xdg ~= "") and xdg or ((os.getenv("HOME") or "/tmp") .. "/.cache")) .. "/llmbox/images"
end

-- A JSON document of the image, by its name inside root.
local function read_json(root, name, what)
    local path = core.resolve_in_root(root, name)
    local f = path and io.open(path, "rb")
    if not f then return nil, format("%s: the image has no %s", what, name) end
    local text = f:read(_M.MAX_JSON + 1) or ""
    f:close()
    if #text > _M.MAX_JSON then return nil, format("%s: %s is larger than %d bytes", what, name, _M.MAX_JSON) end
    local ok, doc = pcall(json.decode, text)
    if not ok or type(doc) ~= "table" then return nil, format("%s: %s is not a JSON object or array", what, name) end
    return doc
end

-- An OCI blob by digest: its host path, checked against the digest.
local function blob(root, digest, what)
    local hex = type(digest) == "string" and digest:match("^sha256:(%x+)$")
    if not hex or #hex ~= 64 then return nil, format("%s: %q is not a sha256 digest", what, tostring(digest)) end
    hex = hex:lower()
    local path = core.resolve_in_root(root, "blobs/sha256/" .. hex)
    if not path then return nil, format("%s: the image has no blob %s", what, digest) end
    local got, err = core.sha256_file(path)
    if got ~= hex then
        return nil, format("%s: blob %s does not match its digest%s", what, digest, err and (": " .. err) or "")
    end
    return path, hex
end

-- docker save: manifest.json names the configuration and the layers, paths in the archive.
local function docker_layers(root, what)
    local m, err = read_json(root, "manifest.json", what)
    if not m then return nil, err end
    if #m ~= 1 then
        return nil, format("%s: the archive holds %d images; llmbox runs one (save a single image)", what, #m)
    end
    local img = m[1]
    if type(img) ~= "table" or type(img.Config) ~= "string" or type(img.Layers) ~= "table" then
        return nil, what .. ": manifest.json is not docker save's (Config and Layers expected)"
    end
    local config = core.resolve_in_root(root, img.Config)
    if not config then return nil, format("%s: the image has no %s (its configuration)", what, img.Config) end
    local layers, digests = {}, { (core.sha256_file(config)) }
    for i, l in ipairs(img.Layers) do
        local p = type(l) == "string" and core.resolve_in_root(root, l)
        if not p then return nil, format("%s: layer %d (%s) is not in the archive", what, i, tostring(l)) end
        layers[i], digests[i + 1] = p, core.sha256_file(p)
    end
    return layers, core.sha256(table.concat(digests, "\n"))
end

-- An OCI layout: index.json -> the image's manifest (linux/amd64 when there are several) ->
-- its configuration and layers, each a blob checked against its digest.
local function oci_layers(root, what)
    local index, err = read_json(root, "index.json", what)
    if not index then return nil, err end
    local list = type(index.manifests) == "table" and index.manifests or {}
    local pick = #list == 1 and list[1] or nil
    for _, m in ipairs(#list > 1 and list or {}) do
        local p = type(m) == "table" and m.platform
        if type(p) == "table" and p.os == "linux" and p.architecture == "amd64" then pick = m break end
    end
    if type(pick) ~= "table" then
        return nil, format("%s: index.json names %d manifests and none for linux/amd64", what, #list)
    end
    local path
    path, err = blob(root, pick.digest, what)
    if not path then return nil, err end
    local f = io.open(path, "rb")
    local ok, manifest = pcall(json.decode, f and f:read(_M.MAX_JSON) or "")
    if f then f:close() end
    if not ok or type(manifest) ~= "table" or type(manifest.layers) ~= "table" or type(manifest.config) ~= "table" then
        return nil, what .. ": the manifest is not an OCI image manifest (an index of indexes is not taken)"
    end
    local config, config_hex = blob(root, manifest.config.digest, what)
    if not config then return nil, config_hex end
    local layers, digests = {}, { config_hex }
    for i, l in ipairs(manifest.layers) do
        layers[i], digests[i + 1] = blob(root, type(l) == "table" and l.digest, what)
        if not layers[i] then return nil, digests[i + 1] end
    end
    return layers, core.sha256(table.concat(digests, "\n"))
end

local function exists(path) return core.resolve_in_root("/", path) ~= nil end

local function my_pid()
    local f = io.open("/proc/self/stat")
    local pid = f and f:read("*l"):match("^(%d+)")
    if f then f:close() end
    return pid or "0"
end

-- Work directories that unpacks which never finished left (the process was killed): named
-- .unpack-PID-..., removed once that process is gone and the directory is ten minutes old (an
-- unpack in another pid namespace that shares the cache keeps its own for that long).
local function sweep(cache)
    local p = io.popen(("find %s -mindepth 1 -maxdepth 1 -name '.unpack-*' -mmin +10 2>/dev/null"):format(q(cache)))
    if not p then return end
    for path in p:lines() do
        local pid = path:match("/%.unpack%-(%d+)%-%x+$")
        if pid and not exists("/proc/" .. pid) then os.execute("rm -rf " .. q(path)) end
    end
    p:close()
end

--- unpack.rootfs(ref) -> host directory | nil, err: the root filesystem an image reference names
--- (TRANSPORT:PATH above), unpacked into the cache when it is not there yet
function _M.rootfs(ref)
    local t, path = ref:match("^([%w%-]+):(.+)$")
    if not (t and _M.TRANSPORTS[t]) then return nil, format("image %s: expected TRANSPORT:PATH (dir:, docker-archive:, "
        .. "oci-archive:, oci:)", ref) end
    if t == "dir" then return path end
    local what = "image " .. ref
    if not exists(path) then return nil, format("%s: %s does not exist", what, path) end
    local cache = _M.cache_dir()
    -- the jail reads the cache as its own host uid (nobody's when llmbox runs as root)
    if os.execute("mkdir -p " .. q(cache) .. " && chmod 755 " .. q(cache)) ~= 0 then
        return nil, format("%s: cannot make the image cache %s", what, cache)
    end
    sweep(cache)
    local work = cache .. "/.unpack-" .. my_pid() .. "-" .. util.random_hex(8)
    local function done(result, err)
        os.execute("rm -rf " .. q(work))
        return result, err
    end
    if os.execute("mkdir -m 700 " .. q(work)) ~= 0 then return nil, what .. ": cannot write the image cache " .. cache end
    local src = path
    if t ~= "oci" then
        src = work .. "/archive"
        os.execute("mkdir " .. q(src))
        local _, err = core.layer_apply(path, src, _M.MAX_BYTES)
        if err then return done(nil, format("%s: %s", what, err)) end
    end
    local layers, id = (t == "docker-archive" and docker_layers or oci_layers)(src, what)
    if not layers then return done(nil, id) end
    if not id then return done(nil, what .. ": its configuration cannot be read") end
    local final = cache .. "/" .. id
    if exists(final .. "/usr") then return done(final) end
    local root = work .. "/rootfs"
    os.execute("mkdir -m 755 " .. q(root))
    local total = 0
    for i, layer in ipairs(layers) do
        local n, err = core.layer_apply(layer, root, _M.MAX_BYTES, total)
        if not n then return done(nil, format("%s: layer %d of %d: %s", what, i, #layers, err)) end
        total = n
    end
    -- into place at once; another process that unpacked the same image first wins
    if not os.rename(root, final) and not exists(final .. "/usr") then
        return done(nil, format("%s: cannot move the unpacked image into %s", what, final))
    end
    return done(final)
end

return _M
