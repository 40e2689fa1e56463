-- llmbox.policy.schema: what a policy may say — the contract with the C core and the session
-- code — as a llmbox.schema spec, with the built-in defaults a policy without `extends` starts
-- from.
--
-- Besides llmbox.schema's options, array specs here carry `inherit`, read by
-- llmbox.policy.merge: "keep" marks a list of security rules (what it names is refused or
-- reported), which a child policy's plain list may not shrink, and `weaker(parent_entry,
-- child_entry)` says how a restated entry would loosen it. Arrays without `inherit` grant things
-- (mounts, variables let through, allowed syscalls): a plain list there is exactly the list,
-- since leaving an entry out only tightens.

local schema = require "llmbox.schema"
local patterns = require "llmbox.checks.patterns"

local type = type
local ipairs = ipairs
local pcall = pcall
local string_find = string.find
local byte, sub = string.byte, string.sub

local quote = schema.quote

local _M = {}

-- the schema: this is the contract with the C core and the session code

local DEFAULT_LIMITS = {
    timeout = 30,
    cpu = 30,
    memory = 512 * 1024 * 1024,
    processes = 64,
    open_files = 256,
    file_size = 64 * 1024 * 1024,
    output = 1024 * 1024,
    workspace = 256 * 1024 * 1024,
    tmp = 64 * 1024 * 1024,
}

-- what a policy that says nothing gets: the same as policies/default.lua (a spec checks that),
-- so forgetting `extends` never silently weakens the jail
local DEFAULT_RO = {
    { src = "/usr", dst = "/usr", optional = false },
    { src = "/etc/ld.so.cache", dst = "/etc/ld.so.cache", optional = true },
    { src = "/etc/localtime", dst = "/etc/localtime", optional = true },
    { src = "/etc/alternatives", dst = "/etc/alternatives", optional = true },
    { src = "/etc/ssl/certs", dst = "/etc/ssl/certs", optional = true },
}

local DEFAULT_DENY = {
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "mount_setattr", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "syslog", "open_by_handle_at", "name_to_handle_at", "quotactl", "fanotify_init",
    "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib", "personality",
}

local DEFAULT_ENV_SET = { PATH = "/usr/local/bin:/usr/bin:/bin", HOME = "/sandbox", LANG = "C.UTF-8" }

_M.defaults = {
    limits = DEFAULT_LIMITS,
    ro = DEFAULT_RO,
    deny = DEFAULT_DENY,
    env_set = DEFAULT_ENV_SET,
}

local ABS_PATH = {
    type = "string",
    pattern = "^/[^%z]*$",
    pattern_desc = 'an absolute path such as "/usr"',
    finish = function(p)
        if ("/" .. p .. "/"):find("/%.%.?/") then
            return nil, 'must not contain "." or ".." components, got ' .. quote(p)
        end
        return p
    end,
}

local MOUNT = {
    type = "record",
    describe = 'a path such as "/usr" or a table { src = "/host/path", dst = "/path/inside", optional = true }',
    coerce = function(v)
        if type(v) == "string" then
            return { src = v }
        end
        return v
    end,
    fields = {
        src = { type = "string", required = true, pattern = ABS_PATH.pattern,
            pattern_desc = ABS_PATH.pattern_desc, finish = ABS_PATH.finish },
        dst = ABS_PATH,
        optional = { type = "boolean", default = false },
    },
    finish = function(m)
        if m.dst == nil then
            m.dst = m.src
        end
        if m.src == "/" or m.dst == "/" then
            return nil, 'binding "/" would expose or hide the whole filesystem; '
                .. "list only the directories programs need, such as /usr"
        end
        return m
    end,
}

local ENV_NAME = { type = "string", pattern = "^[%a_][%w_]*$",
    pattern_desc = 'an environment variable name such as "PATH" (letters, digits and _)' }

-- Address families by the names syscalls.socket_families takes (runtime/seccomp.c resolves them).
local SOCKET_FAMILIES = { "unix", "inet", "inet6", "netlink", "netlink_route", "packet", "vsock", "alg", "xdp",
    "tipc", "rds", "bluetooth", "can", "key", "appletalk", "ax25", "x25", "llc", "nfc", "qipcrtr", "smc", "phonet",
    "ieee802154", "caif", "isdn", "iucv", "rxrpc", "kcm", "pppox", "atmpvc", "atmsvc", "rose", "netrom", "ipx",
    "decnet", "netbeui", "security", "wanpipe", "irda", "ib", "mpls", "bridge" }

_M.SOCKET_FAMILIES = SOCKET_FAMILIES
local SYSCALL = { type = "string", pattern = "^[a-z0-9_]+$",
    pattern_desc = 'a syscall name such as "mount" (lower-case letters, digits and _)' }

local SEVERITY = { type = "enum", values = { "low", "medium", "high", "critical" } }

-- Lua reports a malformed pattern only when matching reaches the bad part, so check the syntax
-- up front: a policy must not load fine and then blow up on the first piece of code it checks.
-- The scan jumps from one of % [ ( ) to the next (the rest cannot be wrong), and verdicts are
-- kept: a load checks each inherited pattern more than once, a daemon reloads the same ones.
local pattern_verdicts, verdicts_kept = {}, 0
local MAX_VERDICTS = 4096

local function scan_pattern(p)
    local i, n, depth = 1, #p, 0
    while true do
        i = string_find(p, "[%%%[%(%)]", i)
        if not i then break end
        local c = byte(p, i)
        if c == 37 then -- %
            local d = sub(p, i + 1, i + 1)
            if d == "" then
                return "ends with '%'"
            elseif d == "b" then
                if i + 3 > n then
                    return "missing arguments to '%b'"
                end
                i = i + 4
            elseif d == "f" then
                if sub(p, i + 2, i + 2) ~= "[" then
                    return "missing '[' after '%f'"
                end
                i = i + 2
            else
                i = i + 2
            end
        elseif c == 91 then -- [
            local j = i + 1
            if byte(p, j) == 94 then j = j + 1 end -- ^
            if byte(p, j) == 93 then j = j + 1 end -- a leading ']' is literal
            while true do
                j = string_find(p, "[%%%]]", j)
                if not j then
                    return "missing ']'"
                elseif byte(p, j) == 37 then
                    if j + 1 > n then
                        return "ends with '%'"
                    end
                    j = j + 2
                else
                    break
                end
            end
            i = j + 1
        elseif c == 40 then -- (
            depth = depth + 1
            i = i + 1
        else -- )
            depth = depth - 1
            if depth < 0 then
                return "unmatched ')'"
            end
            i = i + 1
        end
    end
    if depth > 0 then
        return "unfinished capture"
    end
    local ok, err = pcall(string_find, "", p)
    if not ok then
        return err
    end
    return nil
end

local function lua_pattern_error(p)
    local v = pattern_verdicts[p]
    if v == nil then
        v = scan_pattern(p) or false
        if verdicts_kept >= MAX_VERDICTS then
            pattern_verdicts, verdicts_kept = {}, 0
        end
        pattern_verdicts[p], verdicts_kept = v, verdicts_kept + 1
    end
    return v or nil
end
_M.lua_pattern_error = lua_pattern_error

local LUA_PATTERN = {
    type = "string",
    describe = 'a Lua pattern such as "os%.system%s*%("',
    finish = function(p)
        local err = lua_pattern_error(p)
        if err then
            return nil, "invalid Lua pattern " .. quote(p) .. ": " .. err
                .. " (escape magic characters ( ) . % + - * ? [ ] ^ $ with %)"
        end
        -- checking must stay linear in the code's length: say so now, not on a long line
        local slow = patterns.cost_problem(p)
        if slow then
            return nil, "pattern " .. quote(p) .. " " .. slow
        end
        return p
    end,
}

local PATTERN_RULE = {
    type = "record",
    fields = {
        id = { type = "string", required = true, pattern = "^[%w_%-%.:]+$",
            pattern_desc = 'a rule id such as "os-system" (letters, digits, - _ . :)' },
        pattern = LUA_PATTERN,
        patterns = { type = "array", of = LUA_PATTERN },
        severity = { type = "enum", values = SEVERITY.values, default = "high" },
        message = { type = "string" },
        -- false: match the code only, with the contents of string literals blanked, so the
        -- word "system" in a message is not a call (the quotes themselves stay)
        strings = { type = "boolean", default = true },
    },
    finish = function(r)
        if (r.pattern == nil) == (r.patterns == nil) then
            return nil, 'needs exactly one of "pattern" (a Lua pattern) or "patterns" (a list of them)'
        end
        if r.patterns and #r.patterns == 0 then
            return nil, '"patterns" is empty: give at least one Lua pattern'
        end
        if r.message == nil then
            r.message = "matches rule " .. r.id
        end
        return r
    end,
}

local RESTRICTED_MODULE = {
    type = "record",
    describe = 'a module name such as "subprocess" or a table { name = "subprocess", severity = "high" }',
    coerce = function(v)
        if type(v) == "string" then
            return { name = v }
        end
        return v
    end,
    fields = {
        name = { type = "string", required = true, pattern = "^[%w_%.%-@/:]+$",
            pattern_desc = 'a module name such as "subprocess" or "os.path"' },
        severity = { type = "enum", values = SEVERITY.values, default = "high" },
        message = { type = "string" },
    },
}

-- how a child's restated rule would loosen the parent's (llmbox.policy.merge): a lower severity,
-- or (pattern rules) patterns that no longer include every one the parent's rule had
local SEVERITY_RANK = { low = 1, medium = 2, high = 3, critical = 4 }

local function lower_severity(parent, child)
    local ps = SEVERITY_RANK[type(parent) == "table" and parent.severity or "high"] or 3
    local severity = type(child) == "table" and child.severity or "high"
    local cs = SEVERITY_RANK[severity]
    if cs and cs < ps then
        return "is restated with severity " .. quote(severity) .. ", lower"
    end
    return nil
end

local function weaker_pattern_rule(parent, child)
    local why = lower_severity(parent, child)
    if why or type(child) ~= "table" then
        return why
    end
    if child.strings == false and parent.strings ~= false then
        return "is restated with strings = false, so it matches less"
    end
    local mine = {}
    for _, p in ipairs(child.patterns or { child.pattern }) do
        mine[p] = true
    end
    for _, p in ipairs(parent.patterns or { parent.pattern }) do
        if not mine[p] then
            return "is restated without its pattern " .. quote(p) .. ", so it matches less"
        end
    end
    return nil
end

local LANG_RULES = {
    type = "record",
    fields = {
        patterns = { type = "array", of = PATTERN_RULE, default = {},
            inherit = "keep", weaker = weaker_pattern_rule },
        restricted_modules = { type = "array", of = RESTRICTED_MODULE, default = {},
            inherit = "keep", weaker = lower_severity },
    },
}

-- how much code is checked when a policy does not say: llmbox.checks' own default
local DEFAULT_MAX_CODE_SIZE = require("llmbox.checks").max_code_size

local POLICY = {
    type = "record",
    fields = {
        description = { type = "string", default = "" },
        extends = { type = "string", describe = 'the name or path of a policy, such as "default"' },
        limits = {
            type = "record",
            fields = {
                timeout = { type = "duration", default = DEFAULT_LIMITS.timeout },
                cpu = { type = "duration", default = DEFAULT_LIMITS.cpu },
                -- below ~16M no interpreter starts; say so now rather than at the first run
                memory = { type = "size", default = DEFAULT_LIMITS.memory, min = 16 * 1024 * 1024 },
                processes = { type = "integer", default = DEFAULT_LIMITS.processes, min = 1 },
                -- stdin/stdout/stderr plus what a dynamic loader and an interpreter open at start
                open_files = { type = "integer", default = DEFAULT_LIMITS.open_files, min = 16 },
                file_size = { type = "size", default = DEFAULT_LIMITS.file_size },
                output = { type = "size", default = DEFAULT_LIMITS.output },
                -- a tmpfs with size=0 is *unlimited*, so zero must never reach the C core
                workspace = { type = "size", default = DEFAULT_LIMITS.workspace, min = 64 * 1024 },
                tmp = { type = "size", default = DEFAULT_LIMITS.tmp, min = 64 * 1024 },
                -- a CPU quota in CPUs (0.5: half of one CPU's time); absent: none. Enforced by
                -- the run's cpu cgroup; where none can be had, runs are refused, never unbounded
                cpus = { type = "number", min = 0.01, max = 1024 },
                -- "require": refuse to run where no cgroup can enforce memory and processes
                -- (rlimits would still bound them, but less exactly and without reporting)
                cgroup = { type = "enum", values = { "auto", "require" }, default = "auto" },
            },
        },
        filesystem = {
            type = "record",
            fields = {
                ro = { type = "array", of = MOUNT, default = DEFAULT_RO },
            },
        },
        -- "none": loopback only. "egress": a network namespace of the session's own with
        -- outbound connections through user-mode networking (pasta), never to the host, link-
        -- local or private addresses unless allow names them; with allow, only its entries
        -- (CIDR or name, optional port; names resolved once at session start and pinned).
        -- See llmbox.egress.
        network = {
            type = "record",
            fields = {
                mode = { type = "enum", values = { "none", "egress" }, default = "none",
                    hint = '"none" (loopback only) or "egress" (outbound only, never the host)' },
                allow = { type = "array", of = "string", default = {} },
            },
            finish = function(n)
                local ok, err = require("llmbox.egress").check(n.allow)
                if not ok then return nil, err end
                if n.mode ~= "egress" and #n.allow > 0 then
                    return nil, 'allow lists where egress may go: set mode = "egress" too'
                end
                return n
            end,
        },
        -- Library installs (run{libraries=}, s:install{}): off unless a policy allows them.
        -- An install runs the package manager in the session's jail as the sandbox user,
        -- writing only to the workspace. With `network` it gets egress of its own (never the
        -- host's network; see llmbox.egress) to `network_allow` (as network.allow), by default
        -- the hosts of the sources' URLs and the languages' public registries. Offline sources
        -- are host directories (mounted read-only) or URLs.
        libraries = {
            type = "record",
            fields = {
                allow = { type = "boolean", default = false },
                network = { type = "boolean", default = false },
                network_allow = { type = "array", of = "string", default = {} },
                timeout = { type = "duration", default = 300 },
                sources = {
                    type = "record",
                    fields = {
                        -- pip: directories of wheels (--no-index --find-links) or an index URL
                        python = { type = "record", fields = {
                            find_links = { type = "array", of = "string", default = {} },
                            index_url = "string",
                        } },
                        -- npm: a registry URL
                        javascript = { type = "record", fields = { registry = "string" } },
                        -- gem: a source URL
                        ruby = { type = "record", fields = { source = "string" } },
                        -- install.packages: a CRAN mirror URL or a local repository directory
                        r = { type = "record", fields = { repos = "string" } },
                    },
                },
            },
            finish = function(l)
                local ok, err = require("llmbox.egress").check(l.network_allow)
                if not ok then return nil, err:gsub("^network%.allow", "network_allow") end
                return l
            end,
        },
        -- The kubernetes backend's pods (llmbox.backends.kubernetes): where they go and what
        -- marks them. namespace: else the kubeconfig context's, else "default". pod_manifest:
        -- JSON text of a pod's fields merged into the hardened default (llmbox.k8s.pod), checked
        -- against this policy. Pods llmbox made and no live session holds are deleted by the
        -- backend's maintenance once older than gc_after.
        kubernetes = {
            type = "record",
            fields = {
                namespace = "string",
                context = "string",
                labels = { type = "map", of = "string", default = {} },
                annotations = { type = "map", of = "string", default = {} },
                pod_manifest = "string",
                -- a pod's syscalls and network are the cluster's to enforce, not llmbox's: its
                -- seccomp is the runtime's default, its network cut by a NetworkPolicy that
                -- llmbox makes for it and the cluster's network plugin must enforce. Until a
                -- policy accepts that ("cluster"), the kubernetes backend refuses to run it.
                isolation = { type = "enum", values = { "cluster" },
                    hint = '"cluster": the pod\'s network is cut by a deny-all NetworkPolicy that the cluster\'s '
                        .. 'network plugin must enforce (llmbox adds the policy\'s syscall filter to every run)' },
                ready_timeout = { type = "duration", default = 120 },
                gc_after = { type = "duration", default = 3600 },
            },
        },
        env = {
            type = "record",
            fields = {
                set = { type = "map", key = ENV_NAME, of = "string", default = DEFAULT_ENV_SET },
                pass = { type = "array", of = ENV_NAME, default = { "TZ" } },
            },
        },
        syscalls = {
            type = "record",
            fields = {
                default = { type = "enum", values = { "allow", "deny" }, default = "allow" },
                action = { type = "enum", values = { "errno", "kill" }, default = "errno" },
                deny = { type = "array", of = SYSCALL, default = DEFAULT_DENY, inherit = "keep" },
                allow = { type = "array", of = SYSCALL, default = {} },
                deny_namespace_clone = { type = "boolean", default = true },
                deny_ioctls = { type = "array", default = { "TIOCSTI", "TIOCLINUX" }, inherit = "keep",
                    of = { type = "enum", values = { "TIOCSTI", "TIOCLINUX", "TIOCSETD", "TIOCCONS" } } },
                -- the address families socket() may create: every other is refused by the
                -- filter (vsock is not confined by network namespaces; packet, alg, xdp, tipc,
                -- rds... are kernel surface no sandboxed program needs); netlink_route is
                -- AF_NETLINK for NETLINK_ROUTE only (interface and address queries)
                socket_families = { type = "array", default = { "unix", "inet", "inet6", "netlink_route" },
                    of = { type = "enum", values = SOCKET_FAMILIES } },
            },
            finish = function(s)
                if s.default == "deny" and #s.allow == 0 then
                    return nil, 'default is "deny" but allow is empty, so no program could start; '
                        .. 'list the syscalls programs need in allow, or set default = "allow"'
                end
                return s
            end,
        },
        checks = {
            type = "record",
            fields = {
                mode = { type = "enum", values = { "enforce", "warn", "off" }, default = "enforce" },
                threshold = { type = "enum", values = SEVERITY.values, default = "high" },
                rules = { type = "map", of = LANG_RULES, default = {} },
                -- longer code is not checked: refused under "enforce", run with a warning
                -- under "warn"
                max_code_size = { type = "size", default = DEFAULT_MAX_CODE_SIZE, min = 1 },
            },
        },
    },
}
_M.policy = POLICY

return _M
