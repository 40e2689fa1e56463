-- Egress (issue 18): what a policy's network = { mode = "egress", allow = {...} } becomes for a
-- jail: the allowed destinations, names resolved once at session start and pinned (the jail's
-- /etc/hosts answers them; no other name resolves), and the nftables ruleset of the jail's own
-- network namespace, which runtime/egress.c loads before pasta carries anything out.
--
-- Never reached unless an allow entry names it: the host itself (loopback, and every address
-- of the host's interfaces when the session starts), link-local (169.254.0.0/16 and fe80::/10:
-- the cloud metadata endpoints), private and shared ranges (10/8, 172.16/12, 192.168/16,
-- 100.64/10, fc00::/7), and the unspecified, multicast and reserved ones. With an allow list,
-- nothing but its entries is reached. A refused TCP connection is reset at once (ECONNREFUSED),
-- other packets get an ICMP "administratively prohibited"; refused TCP and UDP destinations
-- are recorded (the result's network_denied).
local ffi = require "ffi"

local _M = {}

pcall(ffi.cdef, "int inet_pton(int af, const char *src, void *dst);")
local AF_INET, AF_INET6 = 2, 10

_M.FORBIDDEN = {
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
    "::/127", "::ffff:0:0/96", "fc00::/7", "fe80::/10", "ff00::/8",
}

local function is_ip(text, family)
    local buf = ffi.new("uint8_t[16]")
    return ffi.C.inet_pton(family == 4 and AF_INET or AF_INET6, text, buf) == 1
end

-- "ADDR[/N]" -> { family, cidr } | nil
local function parse_cidr(text)
    local addr, bits = text:match("^([^/]+)/(%d+)$")
    addr = addr or text
    for _, family in ipairs({ 4, 6 }) do
        if is_ip(addr, family) then
            local max = family == 4 and 32 or 128
            local n = bits and tonumber(bits) or max
            if n > max then return nil end
            return { family = family, cidr = addr .. "/" .. n }
        end
    end
    return nil
end

local function valid_name(name)
    if #name == 0 or #name > 253 or name:find("[^%w%.%-]") then return false end
    for label in name:gmatch("[^%.]+") do
        if #label > 63 or label:sub(1, 1) == "-" or label:sub(-1) == "-" then return false end
    end
    return not name:find("%.%.") and name:sub(1, 1) ~= "."
end

--- egress.parse(entry) -> { cidr =, family = } or { name = }, with port (nil: every port) | nil, err
--- Entries: "198.51.100.0/24:80", "203.0.113.5", "[2001:db8::/32]:443", "pypi.org:443", "pypi.org".
function _M.parse(entry)
    if type(entry) ~= "string" then return nil, "expected a string" end
    local host, port = entry:match("^%[(.+)%]:(%d+)$")
    if not host then host = entry:match("^%[(.+)%]$") end
    if not host then
        local h, p = entry:match("^([^:]+):(%d+)$")
        if h then host, port = h, p elseif not entry:find(":", 1, true) or parse_cidr(entry) then host = entry end
    end
    if not host then
        return nil, ("%q is not an address, a CIDR or a name with an optional :port (an IPv6 address "
            .. "with a port goes in brackets: \"[2001:db8::1]:443\")"):format(entry)
    end
    local n = port and tonumber(port)
    if port and not (n >= 1 and n <= 65535) then
        return nil, ("%q: the port must be 1 to 65535"):format(entry)
    end
    local net = parse_cidr(host)
    if net then
        net.port = n
        return net
    end
    if host:find("[/:]") or host:match("^[%d%.]+$") then
        return nil, ("%q: %q is not a valid address or CIDR"):format(entry, host)
    end
    if not valid_name(host) then
        return nil, ("%q: %q is not a valid host name"):format(entry, host)
    end
    return { name = host:lower(), port = n }
end

--- egress.check(list) -> true | nil, err: a policy's network.allow, entry by entry
function _M.check(list)
    for i, entry in ipairs(list or {}) do
        local ok, err = _M.parse(entry)
        if not ok then return nil, ("network.allow[%d]: %s"):format(i, err) end
    end
    return true
end

--- egress.resolve(list [, lookup]) -> { entries = { {cidr, family, port} ... }, hosts = "lines" } | nil, err
--- Names are resolved here, once: their addresses are what the ruleset allows and what the
--- jail's /etc/hosts answers, so a later answer (DNS rebinding) cannot widen them. lookup(name)
--- -> { "addr", ... } | nil, err (default: the host's resolver, through libuv).
function _M.lookup(name)
    local uv = require "luv"
    local res, err = uv.getaddrinfo(name, nil, { socktype = "stream" })
    if not res then return nil, err end
    local out = {}
    for _, r in ipairs(res) do out[#out + 1] = r.addr end
    return out
end

function _M.resolve(list, lookup)
    lookup = lookup or _M.lookup
    local entries, hosts, seen = {}, {}, {}
    for i, entry in ipairs(list or {}) do
        local e, err = _M.parse(entry)
        if not e then return nil, ("network.allow[%d]: %s"):format(i, err) end
        if e.name then
            local addrs, lerr = lookup(e.name)
            if not addrs or #addrs == 0 then
                return nil, ("network.allow[%d]: %q does not resolve here: %s"):format(i, e.name,
                    tostring(lerr or "no address"))
            end
            for _, a in ipairs(addrs) do
                local net = parse_cidr(a)
                if net then
                    entries[#entries + 1] = { cidr = net.cidr, family = net.family, port = e.port }
                    if not seen[a .. " " .. e.name] then
                        seen[a .. " " .. e.name] = true
                        hosts[#hosts + 1] = a .. "\t" .. e.name .. "\n"
                    end
                end
            end
        else
            entries[#entries + 1] = e
        end
    end
    return { entries = entries, hosts = table.concat(hosts) }
end

--- egress.host_addresses() -> { "addr", ... }: every address of this host's interfaces now
function _M.host_addresses()
    local uv = require "luv"
    local out = {}
    for _, list in pairs(uv.interface_addresses() or {}) do
        for _, a in ipairs(list) do
            local ip = a.ip and a.ip:gsub("%%.*$", "") -- (fe80::1%eth0)
            if ip and parse_cidr(ip) then out[#out + 1] = ip end
        end
    end
    table.sort(out)
    return out
end

local function elements(list, family, with_port)
    local out = {}
    for _, e in ipairs(list) do
        if e.family == family then
            out[#out + 1] = with_port and (e.cidr .. " . " .. (e.port and tostring(e.port) or "0-65535")) or e.cidr
        end
    end
    return out
end

local function set(name, kind, items)
    local s = ("    set %s { type %s; flags interval; auto-merge;"):format(name, kind)
    if #items > 0 then s = s .. " elements = { " .. table.concat(items, ", ") .. " }" end
    return s .. " }\n"
end

--- egress.ruleset(resolved, host_addresses, has_allow_list) -> nft's text: table inet llmbox,
--- with the sets denied/denied6 (what lb_egress_denied reads back)
function _M.ruleset(resolved, host_addrs, has_allow_list)
    local forbidden = {}
    for _, c in ipairs(_M.FORBIDDEN) do forbidden[#forbidden + 1] = parse_cidr(c) end
    for _, a in ipairs(host_addrs or {}) do forbidden[#forbidden + 1] = parse_cidr(a) end
    local allowed = resolved.entries
    local lines = {
        "table inet llmbox {\n",
        "    set denied { type ipv4_addr . inet_service; flags dynamic; size 4096; }\n",
        "    set denied6 { type ipv6_addr . inet_service; flags dynamic; size 4096; }\n",
        set("allow4", "ipv4_addr . inet_service", elements(allowed, 4, true)),
        set("allow6", "ipv6_addr . inet_service", elements(allowed, 6, true)),
        set("forbidden4", "ipv4_addr", elements(forbidden, 4, false)),
        set("forbidden6", "ipv6_addr", elements(forbidden, 6, false)),
        "    chain out {\n",
        "        type filter hook output priority 0; policy accept;\n",
        -- the jail's own loopback is its own: nothing of the host's is there
        "        oif \"lo\" accept\n",
        "        meta l4proto { tcp, udp } ip daddr . th dport @allow4 accept\n",
        "        meta l4proto { tcp, udp } ip6 daddr . th dport @allow6 accept\n",
    }
    if not has_allow_list then
        lines[#lines + 1] = "        ip daddr != @forbidden4 accept\n"
        lines[#lines + 1] = "        ip6 daddr != @forbidden6 accept\n"
    end
    -- everything else: recorded (TCP and UDP) and refused at once
    for _, t in ipairs({ { "ip", "denied" }, { "ip6", "denied6" } }) do
        lines[#lines + 1] = ("        meta l4proto { tcp, udp } add @%s { %s daddr . th dport }\n"):format(t[2], t[1])
    end
    lines[#lines + 1] = "        meta l4proto tcp reject with tcp reset\n"
    lines[#lines + 1] = "        reject with icmpx type admin-prohibited\n"
    lines[#lines + 1] = "    }\n}\n"
    return table.concat(lines)
end

--- egress.denied(json_text) -> { "addr:port", ... } (IPv6 as "[addr]:port"), from
--- session:egress_denied()'s nft JSON documents (one a line)
function _M.denied(text)
    local json = require "llmbox.json"
    local out = {}
    for line in (text or ""):gmatch("[^\n]+") do
        local doc = json.decode(line)
        for _, item in ipairs(type(doc) == "table" and doc.nftables or {}) do
            local s = type(item) == "table" and item.set
            for _, el in ipairs(type(s) == "table" and s.elem or {}) do
                local c = type(el) == "table" and (el.concat or (el.elem and el.elem.val and el.elem.val.concat))
                if type(c) == "table" and c[1] and c[2] then
                    local addr = tostring(c[1])
                    out[#out + 1] = (addr:find(":", 1, true) and ("[" .. addr .. "]") or addr) .. ":" .. tostring(c[2])
                end
            end
        end
    end
    table.sort(out)
    return out
end

--- egress.plan(allow [, opts]) -> { ruleset =, hosts = } | nil, err: a session's egress, made
--- when it opens. opts.lookup, opts.host_addresses: for the specs; opts.optional: names that
--- do not resolve are left out instead of refused (an install's default registries);
--- opts.restricted: only the list, even when it is empty (installs).
function _M.plan(allow, opts)
    opts = opts or {}
    local list = allow or {}
    if opts.optional then
        local lookup = opts.lookup or _M.lookup
        list = {}
        for _, entry in ipairs(allow or {}) do
            local e = _M.parse(entry)
            if e and (not e.name or lookup(e.name)) then list[#list + 1] = entry end
        end
    end
    local resolved, err = _M.resolve(list, opts.lookup)
    if not resolved then return nil, err end
    local hosts = opts.host_addresses or _M.host_addresses()
    return { ruleset = _M.ruleset(resolved, hosts, opts.restricted or #(allow or {}) > 0), hosts = resolved.hosts }
end

-- The public registries of the languages that install (with no source of their own).
local REGISTRIES = {
    python = { "pypi.org:443", "files.pythonhosted.org:443" },
    javascript = { "registry.npmjs.org:443" },
    r = { "cloud.r-project.org:443" },
    ruby = { "rubygems.org:443", "index.rubygems.org:443" },
}

-- "scheme://host[:port]/..." -> "host:port" (nil: not a URL, e.g. a local directory)
local function url_host(url)
    local scheme, rest = tostring(url):match("^(%a[%w+.-]*)://([^/?#]+)")
    if not scheme then return nil end
    rest = rest:gsub("^.*@", "")
    local host, port = rest:match("^(%[.+%]):(%d+)$")
    if not host then host, port = rest:match("^([^:]+):(%d+)$") end
    host = host or rest
    port = port or (scheme:lower() == "https" and "443" or "80")
    return host .. ":" .. port
end

--- egress.install_allow(libraries) -> list, derived: where a policy's installs may go. Its own
--- network_allow when it has one; else each language's source URL's host, or its public
--- registries when it has no source.
function _M.install_allow(lib)
    if #(lib.network_allow or {}) > 0 then return lib.network_allow, false end
    local src, out = lib.sources or {}, {}
    local urls = {
        python = src.python and src.python.index_url,
        javascript = src.javascript and src.javascript.registry,
        r = src.r and src.r.repos,
        ruby = src.ruby and src.ruby.source,
    }
    local local_dirs = { python = src.python and #(src.python.find_links or {}) > 0 }
    for _, lang in ipairs({ "python", "javascript", "r", "ruby" }) do
        local hostport = urls[lang] and url_host(urls[lang])
        if hostport then
            out[#out + 1] = hostport
        elseif not urls[lang] and not local_dirs[lang] then
            for _, r in ipairs(REGISTRIES[lang]) do out[#out + 1] = r end
        end
    end
    return out, true
end

return _M
