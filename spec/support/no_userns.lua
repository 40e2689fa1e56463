-- luajit spec/support/no_userns.lua [--control] PROGRAM [ARGS...]: runs PROGRAM where user
-- namespaces cannot be created, the way a container runtime's default seccomp profile forbids
-- them: unshare and clone with CLONE_NEWUSER fail with EPERM, clone3 (whose flags a filter cannot
-- read) looks absent so libc falls back to clone. --control loads the same kind of filter
-- without those rules, so a spec can tell "no user namespaces" from "any filter at all".
local ffi = require "ffi"

ffi.cdef [[
typedef void *scmp_filter_ctx;
struct scmp_arg_cmp { unsigned int arg; int op; uint64_t datum_a; uint64_t datum_b; };
scmp_filter_ctx seccomp_init(uint32_t def_action);
int seccomp_syscall_resolve_name(const char *name);
int seccomp_rule_add_array(scmp_filter_ctx ctx, uint32_t action, int syscall, unsigned int arg_cnt,
                           const struct scmp_arg_cmp *arg_array);
int seccomp_load(scmp_filter_ctx ctx);
int execvp(const char *file, char *const argv[]);
char *strerror(int errnum);
]]

local ALLOW, CMP_MASKED_EQ, CLONE_NEWUSER = 0x7fff0000, 7, 0x10000000
local function errno_action(e) return 0x00050000 + e end
local EPERM, ENOSYS = 1, 38

local args = { ... }
local control = args[1] == "--control"
if control then table.remove(args, 1) end
assert(args[1], "usage: no_userns.lua [--control] PROGRAM [ARGS...]")

local seccomp = ffi.load("seccomp.so.2")
local ctx = seccomp.seccomp_init(ALLOW)
assert(ctx ~= nil, "seccomp_init failed")
local function rule(action, name, cmp)
    local nr = seccomp.seccomp_syscall_resolve_name(name)
    assert(seccomp.seccomp_rule_add_array(ctx, action, nr, cmp and 1 or 0, cmp) == 0, "rule for " .. name)
end
local newuser = ffi.new("struct scmp_arg_cmp[1]", { { 0, CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER } })
if not control then
    rule(errno_action(EPERM), "unshare", newuser)
    rule(errno_action(EPERM), "clone", newuser)
end
rule(errno_action(ENOSYS), "clone3")
local rc = seccomp.seccomp_load(ctx)
assert(rc == 0, "seccomp_load: " .. ffi.string(ffi.C.strerror(-rc)))

local argv = ffi.new("char *[?]", #args + 1)
local keep = {}
for i, a in ipairs(args) do
    keep[i] = ffi.new("char[?]", #a + 1, a)
    argv[i - 1] = keep[i]
end
ffi.C.execvp(args[1], argv)
io.stderr:write("no_userns.lua: cannot run ", args[1], ": ", ffi.string(ffi.C.strerror(ffi.errno())), "\n")
os.exit(127)
