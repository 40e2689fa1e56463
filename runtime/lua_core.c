/* llmbox.core: the Lua binding of the C core. Small primitives only; lua/llmbox builds the
 * friendly API on top (the Neovim way).
 *
 *   core.backends()                    -> { native = { pool = true, ... }, ... }
 *   core.open(backend, cfg)            -> session | nil, err, errno_name
 *   session:run(spec)                  -> result | nil, err, errno_name
 *       spec = { argv, env, cwd, stdin, files = {{path, data, mode}}, clean = {paths},
 *                limits = {...}, install_network = bool, on_stdout, on_stderr }
 *   session:copy_in(host_path, path [, mode])   -> true [, skipped] | nil, err
 *   session:copy_out(path, host_path [, max])   -> true [, skipped] | nil, err
 *   session:collect(path [, max])      -> { {name, size, data}, ... } | nil, err (in memory)
 *   session:close()
 *   session:prestart(spec)             -> pending | nil, err  (pools: the program waits on fd 3)
 *   session:reset()                    -> true | nil, err     (pools: empty the writable trees)
 * Opening and emptying without blocking (the work is a child's; an event loop watches its fd):
 *   core.open_start(backend, cfg)      -> task | nil, err   (task:result() -> session)
 *   session:reset_start()              -> task | nil, err   (task:result() -> true)
 *   task:fds()                         -> { fd }, { "r" }, timeout_ms | nil (as run:fds)
 *   task:step([wait_ms])               -> over (true | false)
 *   task:result()                      -> as above, or nil, err, errno_name (finishes the work
 *                                         first if it is not over; garbage collection of an
 *                                         unfinished task abandons it without waiting)
 *   pending:wait([ms])                 -> "ready" | "starting" | "dead"
 *   pending:finish{ request, stdin, timeout, output, on_stdout, on_stderr } -> result | nil, err
 *   pending:abandon()                  (garbage collection discards it without waiting)
 * Runs that never block (an event loop drives them; llmbox.backends.native's run is a small
 * loop over them that calls on_stdout/on_stderr from Lua, so they may yield):
 *   session:start(spec)                -> run | nil, err      (spec as for run, no callbacks)
 *   pending:start{ request, stdin, timeout, output } -> run | nil, err
 *   pending:cell{ request, tag, timeout, output, grace } -> run | nil, err (an interactive
 *                                         program's cell: the pending run stays for the next,
 *                                         unless the result says state_lost)
 *   run:fds()                          -> { fd, ... }, { "r" | "w", ... }, timeout_ms | nil
 *   run:step([wait_ms])                -> over (true | false); wait_ms: 0 (default) never
 *                                         blocks, -1 sleeps until something is due
 *   run:take()                         -> { "stdout" | "stderr", data, ... } | nil (output
 *                                         since the last take, in order)
 *   run:abort(why)                     (the caller's side failed: result() returns nil, why)
 *   run:result()                       -> result | nil, err, errno_name (ends the run)
 *   (garbage collection of a run that was not ended kills it without waiting)
 *   core.spawn{ argv, env, cwd, stdin, limits } -> run | nil, err  (no jail: a supervised
 *                                         process whose whole tree dies with it, for backends
 *                                         that wrap another sandbox program)
 *   core.reap([block])                 (pools: collect what finished prestarted runs left)
 *   core.set_run_helper(path)          -> path | nil, err (llmbox-run, each run's first child)
 *   core.tar_entries(archive [, max])  -> { {name, size, data}, ... } | nil, err (an archive
 *                                         someone else made, read as untrusted; lb_tar_entries)
 *   core.tar_pack(files [, uid, gid])  -> archive | nil, err (files as a run's, for a
 *                                         container's `tar -x -C /`; lb_tar_pack)
 *   core.tar_host(host_path [, root])  -> archive [, skipped] | nil, err (what copy_in sends)
 *   core.tar_extract(archive, host_path [, max]) -> true [, skipped] | nil, err (as copy_out)
 *   core.sha256(data)                  -> hex digest (OpenSSL's; what a container's settings
 *                                         are recorded as)
 *   core.http_request_parser([opts])   -> parser (llmbox serve's HTTP, by http-parser: see
 *                                         lua_httpparse.c)
 *   core.probe()                       -> table (for `llmbox doctor`)
 *   core.syscall_number(name)          -> number | nil
 *   core.syscall_names()               -> { name, ... } (the native architecture's)
 *   core.ioctl_number(name)            -> number | nil
 *   core.cgroup()                      -> version, memory, pids, note, cpu (quotas)
 *   core.listdir(path)                 -> sorted array of names | nil, err (for recipe/policy dirs)
 *   core.readlink(path)                -> target | nil, err, errno_name (EINVAL: not a link)
 *   core.jail_etc(hostname)            -> { { path, data }, ... } (a jail's /etc files)
 *
 * Caller mistakes (wrong types) raise errors; failures of the sandbox return nil, err.
 */
#define _GNU_SOURCE
#include "../backends/backend.h"
#include "internal.h"
#include "lazy.h"

#include <dirent.h>
#include <poll.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#define SESSION_MT "llmbox.core.session"
#define PENDING_MT "llmbox.core.pending"
#define RUN_MT	   "llmbox.core.run"
#define TASK_MT	   "llmbox.core.task"

typedef struct lsession {
	const lb_backend *backend;
	void *handle;
} lsession;

static const lb_backend *find_backend(const char *name)
{
	for (const lb_backend *const *b = lb_backends; *b; b++)
		if (strcmp((*b)->name, name) == 0)
			return *b;
	return NULL;
}

/* ---- reading config tables ----
 * Fields are read with rawget: an __index function could hand C a fresh string that nothing
 * keeps alive (a use-after-free the lua_core fuzzer found). */

static void rawfield(lua_State *L, int t, const char *key)
{
	lua_pushstring(L, key);
	lua_rawget(L, t);
}

static double opt_number(lua_State *L, int t, const char *key, double def)
{
	rawfield(L, t, key);
	double v = def;
	if (!lua_isnil(L, -1)) {
		if (!lua_isnumber(L, -1))
			luaL_error(L, "%s: expected a number, got %s", key, luaL_typename(L, -1));
		v = lua_tonumber(L, -1);
		/* NaN fails every comparison: test for what is wanted, not for what is not. Casts
		 * of values beyond 2^53 to integers are undefined, and no limit needs them. */
		if (!(v >= 0 && v <= 9007199254740992.0))
			luaL_error(L, "%s: expected a non-negative number up to 2^53", key);
	}
	lua_pop(L, 1);
	return v;
}

static const char *opt_string(lua_State *L, int t, const char *key, const char *def)
{
	rawfield(L, t, key);
	const char *v = def;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "%s: expected a string, got %s", key, luaL_typename(L, -1));
		v = lua_tostring(L, -1);
	}
	lua_pop(L, 1); /* the string stays alive: it is referenced by the table */
	return v;
}

static bool opt_bool(lua_State *L, int t, const char *key, bool def)
{
	rawfield(L, t, key);
	bool v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
	lua_pop(L, 1);
	return v;
}

/* An array of strings from t[key] as a NULL-terminated vector in a userdata (freed by the GC).
 * Leaves the userdata on the stack. */
static const char **string_array(lua_State *L, int t, const char *key, size_t *n_out)
{
	rawfield(L, t, key);
	int arr = lua_gettop(L);
	size_t n = lua_istable(L, arr) ? lua_objlen(L, arr) : 0;
	if (!lua_isnil(L, arr) && !lua_istable(L, arr))
		luaL_error(L, "%s: expected an array of strings, got %s", key,
			   luaL_typename(L, arr));
	const char **v = lua_newuserdata(L, (n + 1) * sizeof *v);
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, arr, (int)i + 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "%s[%d]: expected a string, got %s", key, (int)i + 1,
				   luaL_typename(L, -1));
		v[i] = lua_tostring(L, -1);
		size_t len;
		lua_tolstring(L, -1, &len);
		if (strlen(v[i]) != len)
			luaL_error(L, "%s[%d]: contains a NUL byte", key, (int)i + 1);
		lua_pop(L, 1);
	}
	v[n] = NULL;
	lua_remove(L, arr); /* the table stays referenced by t */
	if (n_out)
		*n_out = n;
	return v;
}

static void read_limits(lua_State *L, int t, lb_limits *lim)
{
	memset(lim, 0, sizeof *lim);
	rawfield(L, t, "limits");
	if (lua_istable(L, -1)) {
		int l = lua_gettop(L);
		lim->timeout = opt_number(L, l, "timeout", 0);
		lim->cpu = opt_number(L, l, "cpu", 0);
		lim->memory = (uint64_t)opt_number(L, l, "memory", 0);
		lim->processes = (uint64_t)opt_number(L, l, "processes", 0);
		lim->open_files = (uint64_t)opt_number(L, l, "open_files", 0);
		lim->file_size = (uint64_t)opt_number(L, l, "file_size", 0);
		lim->output = (uint64_t)opt_number(L, l, "output", 0);
		lim->cpus = opt_number(L, l, "cpus", 0);
	}
	lua_pop(L, 1);
}

/* The driver named at index 1, or NULL with nil, err, "ENOENT" pushed. */
static const lb_backend *check_backend(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	luaL_checktype(L, 2, LUA_TTABLE);
	const lb_backend *b = find_backend(name);
	if (!b) {
		/* the compiled-in drivers, so the message never goes stale */
		luaL_Buffer have;
		luaL_buffinit(L, &have);
		for (const lb_backend *const *d = lb_backends; *d; d++) {
			if (d != lb_backends)
				luaL_addstring(&have, ", ");
			luaL_addstring(&have, (*d)->name);
		}
		luaL_pushresult(&have);
		lua_pushnil(L);
		lua_pushfstring(L, "backend \"%s\" is not available in this build (have: %s)", name,
				lua_tostring(L, -2));
		lua_pushstring(L, "ENOENT");
		return NULL;
	}
	return b;
}

static const lb_file *read_files(lua_State *L, int t, size_t *n);

/* The policy's syscall rules (the spec's syscalls table) at index sc into sp; the names live on
 * the Lua stack. */
static void read_syscalls(lua_State *L, int sc, lb_syscall_policy *sp)
{
	sp->default_allow = true;
	sp->deny_namespace_clone = true;
	size_t n_ioctl = 0;
	unsigned long *ioctls = NULL;
	if (lua_istable(L, sc)) {
		const char *def = opt_string(L, sc, "default", "allow");
		sp->default_allow = strcmp(def, "deny") != 0;
		const char *action = opt_string(L, sc, "action", "errno");
		sp->kill = strcmp(action, "kill") == 0;
		sp->deny_namespace_clone = opt_bool(L, sc, "deny_namespace_clone", true);
		sp->deny = string_array(L, sc, "deny", &sp->n_deny);
		sp->allow = string_array(L, sc, "allow", &sp->n_allow);
		const char **names = string_array(L, sc, "deny_ioctls", &n_ioctl);
		ioctls = lua_newuserdata(L, (n_ioctl ? n_ioctl : 1) * sizeof *ioctls);
		for (size_t i = 0; i < n_ioctl; i++)
			if (!(ioctls[i] = lb_ioctl_number(names[i])))
				luaL_error(L, "syscalls.deny_ioctls: unknown ioctl \"%s\"",
					   names[i]);
		/* socket_families: names; absent, no rule (a policy's schema gives the default) */
		rawfield(L, sc, "socket_families");
		bool listed = lua_istable(L, -1);
		lua_pop(L, 1);
		if (listed) {
			size_t n_fam = 0;
			const char **fam = string_array(L, sc, "socket_families", &n_fam);
			int *numbers = lua_newuserdata(L, (n_fam ? n_fam : 1) * sizeof *numbers);
			bool netlink_all = false, netlink_route = false;
			for (size_t i = 0; i < n_fam; i++) {
				if ((numbers[i] = lb_socket_family(fam[i])) < 0)
					luaL_error(
						L,
						"syscalls.socket_families: unknown address family "
						"\"%s\"",
						fam[i]);
				netlink_all |= strcmp(fam[i], "netlink") == 0;
				netlink_route |= strcmp(fam[i], "netlink_route") == 0;
			}
			sp->restrict_sockets = true;
			sp->socket_families = numbers;
			sp->n_socket_families = n_fam;
			sp->netlink_route_only = netlink_route && !netlink_all;
		}
	}
	sp->deny_ioctls = ioctls;
	sp->n_deny_ioctls = n_ioctl;
}

/* The open config at index 2; what it points to lives on the Lua stack. */
static void read_open_config(lua_State *L, lb_open_config *out)
{
	lb_open_config cfg = {0};
	/* Sizes come from the policy (its defaults live in llmbox.policy, nowhere else). */
	double workspace = opt_number(L, 2, "workspace", 0), tmp = opt_number(L, 2, "tmp", 0);
	if (!(workspace > 0 && tmp > 0))
		luaL_error(L, "workspace and tmp: sizes in bytes are required (the policy's "
			      "limits.workspace and limits.tmp)");
	cfg.jail.workspace_size = (uint64_t)workspace;
	cfg.jail.tmp_size = (uint64_t)tmp;
	cfg.jail.hostname = opt_string(L, 2, "hostname", "llmbox");
	cfg.jail.hosts_extra = opt_string(L, 2, "hosts_extra", NULL);
	cfg.jail.rootfs = opt_string(L, 2, "rootfs", NULL);
	if (cfg.jail.rootfs && cfg.jail.rootfs[0] != '/')
		luaL_error(L, "rootfs: an absolute path is required");
	double uid = opt_number(L, 2, "host_uid", 65534), gid = opt_number(L, 2, "host_gid", 65534);
	if (uid > 4294967294.0 || gid > 4294967294.0) /* (uid_t)-1 means "no change" */
		luaL_error(L, "host_uid/host_gid: expected an id below 4294967295");
	cfg.jail.host_uid = (uid_t)uid;
	cfg.jail.host_gid = (gid_t)gid;

	rawfield(L, 2, "ro");
	int ro = lua_gettop(L);
	size_t n_ro = lua_istable(L, ro) ? lua_objlen(L, ro) : 0;
	lb_mount *mounts = lua_newuserdata(L, (n_ro ? n_ro : 1) * sizeof *mounts);
	for (size_t i = 0; i < n_ro; i++) {
		lua_rawgeti(L, ro, (int)i + 1);
		int m = lua_gettop(L);
		luaL_argcheck(L, lua_istable(L, m), 2, "ro entries must be tables {src=, dst=}");
		mounts[i].src = opt_string(L, m, "src", NULL);
		mounts[i].dst = opt_string(L, m, "dst", mounts[i].src);
		mounts[i].optional = opt_bool(L, m, "optional", false);
		mounts[i].in_root = opt_bool(L, m, "in_root", false);
		if (!mounts[i].src || mounts[i].src[0] != '/' || !mounts[i].dst ||
		    mounts[i].dst[0] != '/')
			luaL_error(L, "ro[%d]: src and dst must be absolute paths", (int)i + 1);
		lua_pop(L, 1);
	}
	cfg.jail.ro = mounts;
	cfg.jail.n_ro = n_ro;

	rawfield(L, 2, "syscalls");
	read_syscalls(L, lua_gettop(L), &cfg.syscalls);

	/* bubblewrap, nsjail: wrap = { argv = {...}, ready = path, files = {{path, data}, ...},
	 * config = text } */
	rawfield(L, 2, "wrap");
	int w = lua_gettop(L);
	if (lua_istable(L, w)) {
		cfg.wrap_argv = string_array(L, w, "argv", &cfg.wrap_argc);
		cfg.wrap_ready = opt_string(L, w, "ready", NULL);
		rawfield(L, w, "config");
		if (lua_type(L, -1) == LUA_TSTRING)
			cfg.wrap_config = lua_tolstring(L, -1, &cfg.wrap_config_len);
		lua_pop(L, 1); /* (referenced by the table) */
		/* (ready is opened by the caller: a relative path is the caller's) */
		if (cfg.wrap_argc < 1 || cfg.wrap_argv[0][0] != '/' || !cfg.wrap_ready)
			luaL_error(L, "wrap: argv (the program's absolute path first) and ready "
				      "are required");
		cfg.wrap_files = read_files(L, w, &cfg.n_wrap_files);
	}
	*out = cfg;
}

/* A new session userdata for b, its handle still NULL. */
static lsession *new_session(lua_State *L, const lb_backend *b)
{
	lsession *s = lua_newuserdata(L, sizeof *s);
	s->backend = b;
	s->handle = NULL;
	luaL_getmetatable(L, SESSION_MT);
	lua_setmetatable(L, -2);
	return s;
}

/* core.open(backend, cfg) */
static int l_open(lua_State *L)
{
	const lb_backend *b = check_backend(L);
	if (!b)
		return 3;
	lb_open_config cfg;
	read_open_config(L, &cfg);
	lsession *s = new_session(L, b);
	lb_error err = {0};
	s->handle = b->open(&cfg, &err);
	if (!s->handle)
		return lb_lua_push_error(L, &err);
	return 1;
}

static lsession *check_session(lua_State *L)
{
	lsession *s = luaL_checkudata(L, 1, SESSION_MT);
	if (!s->handle)
		luaL_error(L, "session is closed");
	return s;
}

struct out_ctx {
	lua_State *L;
	int on_stdout, on_stderr; /* stack indices, 0 when absent */
	char errmsg[512];
};

static int on_output(void *ud, enum lb_stream stream, const char *buf, size_t len)
{
	struct out_ctx *c = ud;
	int fn = stream == LB_STDOUT ? c->on_stdout : c->on_stderr;
	if (!fn)
		return 0;
	lua_pushvalue(c->L, fn);
	lua_pushlstring(c->L, buf, len);
	if (lua_pcall(c->L, 1, 0, 0) != 0) {
		snprintf(c->errmsg, sizeof c->errmsg, "%s callback failed: %s",
			 stream == LB_STDOUT ? "on_stdout" : "on_stderr",
			 lua_isstring(c->L, -1) ? lua_tostring(c->L, -1)
						: "(error object is not a string)");
		lua_pop(c->L, 1);
		return 1;
	}
	return 0;
}

static void read_callbacks(lua_State *L, int t, struct out_ctx *ctx)
{
	rawfield(L, t, "on_stdout");
	if (lua_isfunction(L, -1))
		ctx->on_stdout = lua_gettop(L);
	rawfield(L, t, "on_stderr");
	if (lua_isfunction(L, -1))
		ctx->on_stderr = lua_gettop(L);
}

/* stdin (or request) as a string kept on the stack: the supervisor writes it while callbacks
 * run, and a callback may drop it from the spec table. */
static const char *read_bytes(lua_State *L, int t, const char *key, size_t *len)
{
	rawfield(L, t, key);
	if (lua_isnil(L, -1)) {
		*len = 0;
		return NULL;
	}
	if (lua_type(L, -1) != LUA_TSTRING)
		luaL_error(L, "%s: expected a string", key);
	return lua_tolstring(L, -1, len);
}

/* The array t.files of { path =, data =, mode = } (absolute paths); what it points to lives on
 * the Lua stack. */
static const lb_file *read_files(lua_State *L, int t, size_t *n)
{
	rawfield(L, t, "files");
	int ft = lua_gettop(L);
	size_t nf = lua_istable(L, ft) ? lua_objlen(L, ft) : 0;
	lb_file *files = lua_newuserdata(L, (nf ? nf : 1) * sizeof *files);
	for (size_t i = 0; i < nf; i++) {
		lua_rawgeti(L, ft, (int)i + 1);
		int f = lua_gettop(L);
		if (!lua_istable(L, f))
			luaL_error(L, "files[%d]: expected {path=, data=}", (int)i + 1);
		files[i].path = opt_string(L, f, "path", NULL);
		rawfield(L, f, "data");
		if (!files[i].path || files[i].path[0] != '/' || lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "files[%d]: needs an absolute path and string data",
				   (int)i + 1);
		files[i].data = lua_tolstring(L, -1, &files[i].len);
		lua_pop(L, 1);
		double mode = opt_number(L, f, "mode", 0644);
		if (mode > 07777)
			luaL_error(L, "files[%d].mode: expected a file mode (0 to 07777)",
				   (int)i + 1);
		files[i].mode = (unsigned)mode;
		lua_pop(L, 1);
	}
	*n = nf;
	return files;
}

/* Fills spec from the table at t; everything it points to stays on the Lua stack. */
static void read_run_spec(lua_State *L, int t, lb_run_spec *spec, struct out_ctx *ctx)
{
	size_t argc;
	spec->argv = string_array(L, t, "argv", &argc);
	if (argc == 0)
		luaL_error(L, "argv: expected a non-empty array of strings");
	spec->envp = string_array(L, t, "env", NULL);
	spec->cwd = opt_string(L, t, "cwd", NULL);
	spec->stdin_data = read_bytes(L, t, "stdin", &spec->stdin_len);

	size_t nf;
	const lb_file *files = read_files(L, t, &nf);
	spec->files = files;
	spec->n_files = nf;
	spec->clean = string_array(L, t, "clean", &spec->n_clean);
	spec->install_network = opt_bool(L, t, "install_network", false);
	spec->hosts = opt_string(L, t, "hosts", NULL);
	spec->probe = opt_string(L, t, "probe", NULL);
	read_limits(L, t, &spec->limits);
	ctx->L = L;
	read_callbacks(L, t, ctx);
	spec->on_output = on_output;
	spec->ud = ctx;
}

static void push_result(lua_State *L, lb_result *res)
{
	lua_createtable(L, 0, 12);
	lua_pushinteger(L, res->exit_code);
	lua_setfield(L, -2, "exit_code");
	if (res->signal) {
		lua_pushinteger(L, res->signal);
		lua_setfield(L, -2, "signal");
	}
	const char *limit = lb_limit_name(res->limit);
	if (limit) {
		lua_pushstring(L, limit);
		lua_setfield(L, -2, "limit");
	}
	lua_pushboolean(L, res->limit == LB_LIMIT_TIMEOUT);
	lua_setfield(L, -2, "timed_out");
	lua_pushboolean(L, res->truncated);
	lua_setfield(L, -2, "truncated");
	lua_pushboolean(L, res->probe_found);
	lua_setfield(L, -2, "probe_found");
	lua_pushnumber(L, res->duration_ms);
	lua_setfield(L, -2, "duration_ms");
	if (res->cpu_ms >= 0) { /* unknown: absent, never a wrong number */
		lua_pushnumber(L, res->cpu_ms);
		lua_setfield(L, -2, "cpu_ms");
	}
	lua_pushnumber(L, (double)res->max_rss);
	lua_setfield(L, -2, "max_rss");
	lua_pushlstring(L, res->out, res->out_len);
	lua_setfield(L, -2, "stdout");
	lua_pushlstring(L, res->err, res->err_len);
	lua_setfield(L, -2, "stderr");
	if (res->value) {
		lua_pushlstring(L, res->value, res->value_len);
		lua_setfield(L, -2, "value");
	}
	if (res->state_lost) {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, "state_lost");
	}
	if (res->interrupted) {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, "interrupted");
	}
	lb_result_free(res);
}

/* session:run{ argv=, env=, cwd=, stdin=, files=, limits=, on_stdout=, on_stderr= } */
static int l_run(lua_State *L)
{
	lsession *s = check_session(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	lb_run_spec spec = {0};
	struct out_ctx ctx = {0};
	read_run_spec(L, 2, &spec, &ctx);
	lb_result res;
	lb_error err = {0};
	if (s->backend->run(s->handle, &spec, &res, &err) < 0) {
		if (ctx.errmsg[0])
			snprintf(err.msg, sizeof err.msg, "%s", ctx.errmsg);
		return lb_lua_push_error(L, &err);
	}
	push_result(L, &res);
	return 1;
}

/* ---- prestarted runs, for pools ---- */

/* nil, "backend X cannot ...", "ENOTSUP": a driver without an optional operation */
static int push_unsupported(lua_State *L, const lb_backend *b, const char *what)
{
	lua_pushnil(L);
	lua_pushfstring(L, "backend \"%s\" cannot %s", b->name, what);
	lua_pushstring(L, "ENOTSUP");
	return 3;
}

typedef struct lpending {
	const lb_backend *backend;
	void *handle; /* NULL once finished or abandoned */
	bool busy;    /* an interactive program's cell is running (pending:cell) */
} lpending;

static lpending *check_pending(lua_State *L)
{
	lpending *p = luaL_checkudata(L, 1, PENDING_MT);
	if (!p->handle)
		luaL_error(L, "this prestarted run was already used or abandoned");
	if (p->busy)
		luaL_error(L, "this interactive program is running a cell: one at a time");
	return p;
}

/* session:prestart{ same as run, minus stdin and callbacks } -> pending | nil, err */
static int l_prestart(lua_State *L)
{
	lsession *s = check_session(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	if (!s->backend->prestart)
		return push_unsupported(L, s->backend, "prestart runs");
	lb_run_spec spec = {0};
	struct out_ctx ctx = {0};
	read_run_spec(L, 2, &spec, &ctx);
	spec.stdin_data = NULL; /* given to finish */
	spec.prestart = true;
	lpending *p = lua_newuserdata(L, sizeof *p);
	*p = (lpending){.backend = s->backend};
	luaL_getmetatable(L, PENDING_MT);
	lua_setmetatable(L, -2);
	lb_error err = {0};
	if (s->backend->prestart(s->handle, &spec, &p->handle, &err) < 0)
		return lb_lua_push_error(L, &err);
	return 1;
}

/* pending:wait([ms]) -> "ready" | "starting" | "dead" */
static int l_pending_wait(lua_State *L)
{
	lpending *p = check_pending(L);
	double ms = luaL_optnumber(L, 2, 0);
	if (!(ms >= 0 && ms <= 86400000))
		return luaL_argerror(L, 2, "expected milliseconds (0 to 86400000)");
	int r = p->backend->pending_wait(p->handle, (int)ms);
	lua_pushstring(L, r > 0 ? "ready" : r == 0 ? "starting" : "dead");
	return 1;
}

/* pending:finish{ request=, stdin=, timeout=, output=, on_stdout=, on_stderr= } -> result */
static int l_pending_finish(lua_State *L)
{
	lpending *p = check_pending(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	lb_run_io io = {0};
	io.request = read_bytes(L, 2, "request", &io.request_len);
	io.stdin_data = read_bytes(L, 2, "stdin", &io.stdin_len);
	io.timeout = opt_number(L, 2, "timeout", 0);
	io.output = (uint64_t)opt_number(L, 2, "output", 0);
	struct out_ctx ctx = {.L = L};
	read_callbacks(L, 2, &ctx);
	io.on_output = on_output;
	io.ud = &ctx;
	void *h = p->handle;
	p->handle = NULL; /* finish frees it, whatever happens */
	lb_result res;
	lb_error err = {0};
	if (p->backend->pending_finish(h, &io, &res, &err) < 0) {
		if (ctx.errmsg[0])
			snprintf(err.msg, sizeof err.msg, "%s", ctx.errmsg);
		return lb_lua_push_error(L, &err);
	}
	push_result(L, &res);
	return 1;
}

static int l_pending_abandon(lua_State *L)
{
	lpending *p = luaL_checkudata(L, 1, PENDING_MT);
	if (p->handle) {
		p->backend->pending_abandon(p->handle);
		p->handle = NULL;
	}
	return 0;
}

/* ---- runs that never block ---- */

struct chunk {
	struct chunk *next;
	enum lb_stream stream;
	size_t len;
	char data[];
};

typedef struct lrun {
	const lb_backend *backend;
	void *run; /* NULL once ended or discarded */
	struct chunk *head, *tail;
	lpending *cell_of; /* a cell: the interactive program's pending run (kept in the fenv) */
} lrun;

/* A cell has ended (or was discarded): its program is free for the next one, or gone. */
static void cell_over(lrun *r, bool program_gone)
{
	if (!r->cell_of)
		return;
	r->cell_of->busy = false;
	if (program_gone)
		r->cell_of->handle = NULL;
	r->cell_of = NULL;
}

/* Output is queued, never handed to Lua from inside the supervisor: run:take() gives it to Lua
 * after the step, where a callback may yield or fail without a C frame in between. */
static int queue_output(void *ud, enum lb_stream stream, const char *buf, size_t len)
{
	lrun *r = ud;
	struct chunk *c = malloc(sizeof *c + len);
	if (!c)
		return 1; /* the run is stopped: out of memory for its output */
	c->next = NULL;
	c->stream = stream;
	c->len = len;
	memcpy(c->data, buf, len);
	if (r->tail)
		r->tail->next = c;
	else
		r->head = c;
	r->tail = c;
	return 0;
}

static void free_chunks(lrun *r)
{
	while (r->head) {
		struct chunk *c = r->head;
		r->head = c->next;
		free(c);
	}
	r->tail = NULL;
}

/* A new run userdata. The strings its I/O points to while it runs (stdin, a prestarted run's
 * request: fields of the table at `keep`, read with rawget like read_bytes did) are kept in its
 * environment, so the caller changing that table later cannot free them under it. */
static lrun *new_run(lua_State *L, const lb_backend *b, int keep)
{
	lrun *r = lua_newuserdata(L, sizeof *r);
	*r = (lrun){.backend = b};
	luaL_getmetatable(L, RUN_MT);
	lua_setmetatable(L, -2);
	lua_createtable(L, 4, 0);
	rawfield(L, keep, "stdin");
	lua_rawseti(L, -2, 1);
	rawfield(L, keep, "request");
	lua_rawseti(L, -2, 2);
	rawfield(L, keep, "tag");
	lua_rawseti(L, -2, 3);
	lua_setfenv(L, -2);
	return r;
}

static lrun *check_run(lua_State *L)
{
	lrun *r = luaL_checkudata(L, 1, RUN_MT);
	if (!r->run)
		luaL_error(L, "this run has ended");
	return r;
}

/* session:start(spec) -> run | nil, err */
static int l_start(lua_State *L)
{
	lsession *s = check_session(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	if (!s->backend->start)
		return push_unsupported(L, s->backend, "start runs without blocking");
	lb_run_spec spec = {0};
	struct out_ctx ctx = {0};
	read_run_spec(L, 2, &spec, &ctx);
	lrun *r = new_run(L, s->backend, 2);
	spec.on_output = queue_output;
	spec.ud = r;
	lb_error err = {0};
	if (s->backend->start(s->handle, &spec, &r->run, &err) < 0)
		return lb_lua_push_error(L, &err);
	return 1;
}

/* pending:start{ request=, stdin=, timeout=, output= } -> run | nil, err */
static int l_pending_start(lua_State *L)
{
	lpending *p = check_pending(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	if (!p->backend->pending_start)
		return push_unsupported(L, p->backend, "start runs without blocking");
	lb_run_io io = {0};
	io.request = read_bytes(L, 2, "request", &io.request_len);
	io.stdin_data = read_bytes(L, 2, "stdin", &io.stdin_len);
	io.timeout = opt_number(L, 2, "timeout", 0);
	io.output = (uint64_t)opt_number(L, 2, "output", 0);
	lrun *r = new_run(L, p->backend, 2);
	io.on_output = queue_output;
	io.ud = r;
	void *h = p->handle;
	p->handle = NULL; /* the run owns it now, whatever happens */
	lb_error err = {0};
	if (p->backend->pending_start(h, &io, &r->run, &err) < 0)
		return lb_lua_push_error(L, &err);
	return 1;
}

/* pending:cell{ request = code, tag =, timeout =, output =, grace = } -> run | nil, err: one
 * cell of an interactive program; the pending run stays, for the next cell, unless the result
 * says state_lost */
static int l_pending_cell(lua_State *L)
{
	lpending *p = check_pending(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	if (!p->backend->pending_start)
		return push_unsupported(L, p->backend, "run cells");
	lb_run_io io = {0};
	io.request = read_bytes(L, 2, "request", &io.request_len);
	size_t tag_len;
	io.cell_tag = read_bytes(L, 2, "tag", &tag_len);
	if (!io.cell_tag || tag_len == 0 || tag_len > 40)
		return luaL_argerror(L, 2, "tag: expected a word of 1 to 40 characters");
	io.timeout = opt_number(L, 2, "timeout", 0);
	io.output = (uint64_t)opt_number(L, 2, "output", 0);
	io.grace = opt_number(L, 2, "grace", 0);
	lrun *r = new_run(L, p->backend, 2);
	/* the run keeps the pending userdata alive while the cell runs */
	lua_getfenv(L, -1);
	lua_pushvalue(L, 1);
	lua_rawseti(L, -2, 4);
	lua_pop(L, 1);
	io.on_output = queue_output;
	io.ud = r;
	p->busy = true;
	r->cell_of = p;
	lb_error err = {0};
	if (p->backend->pending_start(p->handle, &io, &r->run, &err) < 0) {
		cell_over(r, true); /* a program that cannot take a cell is gone */
		return lb_lua_push_error(L, &err);
	}
	return 1;
}

static int l_run_fds(lua_State *L)
{
	lrun *r = check_run(L);
	struct pollfd pf[16];
	int timeout;
	int n = r->backend->run_fds(r->run, pf, 16, &timeout);
	return lb_lua_push_fds(L, pf, n, timeout);
}

static int l_run_step(lua_State *L)
{
	lrun *r = check_run(L);
	double ms = luaL_optnumber(L, 2, 0);
	if (!(ms >= -1 && ms <= 86400000))
		return luaL_argerror(L, 2, "expected milliseconds (-1 to 86400000)");
	lua_pushboolean(L, r->backend->run_step(r->run, (int)ms));
	return 1;
}

/* Also after the run has ended: what result() streamed last (a command that could not start). */
static int l_run_take(lua_State *L)
{
	lrun *r = luaL_checkudata(L, 1, RUN_MT);
	if (!r->head) {
		lua_pushnil(L);
		return 1;
	}
	lua_newtable(L);
	int n = 0;
	for (struct chunk *c = r->head; c; c = c->next) {
		lua_pushstring(L, c->stream == LB_STDOUT ? "stdout" : "stderr");
		lua_rawseti(L, -2, ++n);
		lua_pushlstring(L, c->data, c->len);
		lua_rawseti(L, -2, ++n);
	}
	free_chunks(r);
	return 1;
}

static int l_run_abort(lua_State *L)
{
	lrun *r = check_run(L);
	r->backend->run_abort(r->run, luaL_checkstring(L, 2));
	return 0;
}

static int l_run_result(lua_State *L)
{
	lrun *r = check_run(L);
	void *run = r->run;
	r->run = NULL;
	lb_result res;
	lb_error err = {0};
	if (r->backend->run_end(run, &res, &err) < 0) {
		cell_over(r, true);
		return lb_lua_push_error(L, &err);
	}
	cell_over(r, res.state_lost);
	push_result(L, &res);
	return 1;
}

static int l_run_gc(lua_State *L)
{
	lrun *r = luaL_checkudata(L, 1, RUN_MT);
	if (r->run) {
		r->backend->run_discard(r->run);
		r->run = NULL;
		cell_over(r, true);
	}
	free_chunks(r);
	return 0;
}

/* core.spawn{ argv=, env=, cwd=, stdin=, limits= } -> run | nil, err */
static int l_spawn(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lb_run_spec spec = {0};
	struct out_ctx ctx = {0};
	read_run_spec(L, 1, &spec, &ctx);
	lrun *r = new_run(L, &lb_spawn_ops, 1);
	lb_error err = {0};
	lb_pending *p;
	if (lb_spawn(&spec, NULL, &p, &err) < 0)
		return lb_lua_push_error(L, &err);
	lb_run_io io = {.stdin_data = spec.stdin_data,
			.stdin_len = spec.stdin_len,
			.on_output = queue_output,
			.ud = r};
	lb_active *a;
	if (lb_active_begin(p, &io, &a, &err) < 0)
		return lb_lua_push_error(L, &err);
	r->run = a;
	return 1;
}

/* A prestarted run nobody used: killed, and collected later (lb_reap) instead of waited for. */
static int l_pending_gc(lua_State *L)
{
	lpending *p = luaL_checkudata(L, 1, PENDING_MT);
	if (p->handle) {
		if (p->backend->pending_discard)
			p->backend->pending_discard(p->handle);
		else
			p->backend->pending_abandon(p->handle);
		p->handle = NULL;
	}
	return 0;
}

/* session:reset() -> true | nil, err */
static int l_reset(lua_State *L)
{
	lsession *s = check_session(L);
	if (!s->backend->reset)
		return push_unsupported(L, s->backend, "reset a session");
	lb_error err = {0};
	if (s->backend->reset(s->handle, &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushboolean(L, 1);
	return 1;
}

/* session:egress(ruleset [, pasta [, installs]]) -> true | nil, err: the session's runs (with
 * installs: its library installs' runs) get a network of their own, outbound only, governed by
 * ruleset (see lb_egress_open). */
static int l_egress(lua_State *L)
{
	lsession *s = check_session(L);
	const char *ruleset = luaL_checkstring(L, 2);
	const char *pasta = luaL_optstring(L, 3, NULL);
	bool installs = lua_toboolean(L, 4);
	if (!s->backend->egress)
		return push_unsupported(L, s->backend, "give runs egress");
	lb_error err = {0};
	if (s->backend->egress(s->handle, ruleset, pasta, installs, &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushboolean(L, 1);
	return 1;
}

/* session:egress_denied([installs]) -> JSON text (nft's, of the refused destinations since
 * the last call) | nil, err */
static int l_egress_denied(lua_State *L)
{
	lsession *s = check_session(L);
	if (!s->backend->egress_denied)
		return push_unsupported(L, s->backend, "report egress refusals");
	lb_error err = {0};
	char *out = NULL;
	if (s->backend->egress_denied(s->handle, lua_toboolean(L, 2), &out, &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushstring(L, out);
	free(out);
	return 1;
}

/* The newline-separated names in skipped as an array, when there are any: 1 value, else 0. */
static int push_skipped(lua_State *L, char *skipped)
{
	if (!skipped[0])
		return 0;
	lua_newtable(L);
	int n = 0;
	for (char *save = NULL, *line = strtok_r(skipped, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		lua_pushstring(L, line);
		lua_rawseti(L, -2, ++n);
	}
	return 1;
}

/* Returns true, or true plus an array of skipped entries, or nil, err. */
static int l_copy(lua_State *L, bool in)
{
	lsession *s = check_session(L);
	const char *a = luaL_checkstring(L, 2);
	const char *b = luaL_checkstring(L, 3);
	lb_error err = {0};
	char skipped[2048] = "";
	/* mode (copy_in) or max bytes (copy_out): range-checked before any cast */
	double arg = luaL_optnumber(L, 4, in ? 0644 : 0);
	if (!(arg >= 0 && arg <= (in ? 07777 : 9007199254740992.0)))
		return luaL_argerror(L, 4,
				     in ? "expected a file mode (0 to 07777)"
					: "expected a byte count (0 for no limit)");
	int r = in ? s->backend->copy_in(s->handle, a, b, (unsigned)arg, skipped, sizeof skipped,
					 &err)
		   : s->backend->copy_out(s->handle, a, b, (uint64_t)arg, skipped, sizeof skipped,
					  &err);
	if (r < 0)
		return lb_lua_push_error(L, &err);
	lua_pushboolean(L, 1);
	return 1 + push_skipped(L, skipped);
}

static int l_copy_in(lua_State *L)
{
	return l_copy(L, true);
}

static int l_copy_out(lua_State *L)
{
	return l_copy(L, false);
}

struct collected {
	lua_State *L;
	int n;
};

/* Each file as { name =, size =, data = } appended to the table on top of the stack. */
static int collect_entry(void *ud, const char *name, const char *data, size_t len)
{
	struct collected *c = ud;
	lua_createtable(c->L, 0, 3);
	lua_pushstring(c->L, name);
	lua_setfield(c->L, -2, "name");
	lua_pushnumber(c->L, (double)len);
	lua_setfield(c->L, -2, "size");
	lua_pushlstring(c->L, data, len);
	lua_setfield(c->L, -2, "data");
	lua_rawseti(c->L, -2, ++c->n);
	return 0;
}

/* session:collect(path [, max]) -> { {name, size, data}, ... } | nil, err, errno_name */
static int l_collect(lua_State *L)
{
	lsession *s = check_session(L);
	const char *path = luaL_checkstring(L, 2);
	double max = luaL_optnumber(L, 3, 0);
	if (!(max >= 0 && max <= 9007199254740992.0))
		return luaL_argerror(L, 3, "expected a byte count (0 for no limit)");
	if (!s->backend->collect)
		return push_unsupported(L, s->backend, "collect results");
	lua_newtable(L);
	struct collected c = {.L = L};
	lb_error err = {0};
	if (s->backend->collect(s->handle, path, (uint64_t)max, collect_entry, &c, &err) < 0)
		return lb_lua_push_error(L, &err);
	return 1;
}

/* ---- opening and emptying without blocking (tasks) ---- */

typedef struct ltask {
	const lb_backend *backend;
	void *task;   /* NULL once ended */
	bool opening; /* its result is a session */
} ltask;

static ltask *new_task(lua_State *L, const lb_backend *b, bool opening)
{
	ltask *t = lua_newuserdata(L, sizeof *t);
	*t = (ltask){.backend = b, .opening = opening};
	luaL_getmetatable(L, TASK_MT);
	lua_setmetatable(L, -2);
	return t;
}

static ltask *check_task(lua_State *L)
{
	ltask *t = luaL_checkudata(L, 1, TASK_MT);
	if (!t->task)
		luaL_error(L, "the task has ended");
	return t;
}

/* core.open_start(backend, cfg) -> task | nil, err, errno_name */
static int l_open_start(lua_State *L)
{
	const lb_backend *b = check_backend(L);
	if (!b)
		return 3;
	if (!b->open_start)
		return push_unsupported(L, b, "open a session without blocking");
	lb_open_config cfg;
	read_open_config(L, &cfg);
	ltask *t = new_task(L, b, true);
	lb_error err = {0};
	if (b->open_start(&cfg, &t->task, &err) < 0)
		return lb_lua_push_error(L, &err);
	return 1;
}

/* session:reset_start() -> task | nil, err, errno_name */
static int l_reset_start(lua_State *L)
{
	lsession *s = check_session(L);
	if (!s->backend->reset_start)
		return push_unsupported(L, s->backend, "reset a session without blocking");
	ltask *t = new_task(L, s->backend, false);
	lb_error err = {0};
	if (s->backend->reset_start(s->handle, &t->task, &err) < 0)
		return lb_lua_push_error(L, &err);
	return 1;
}

static int l_task_fds(lua_State *L)
{
	ltask *t = check_task(L);
	struct pollfd pf[4];
	int timeout;
	int n = t->backend->task_fds(t->task, pf, 4, &timeout);
	return lb_lua_push_fds(L, pf, n, timeout);
}

static int l_task_step(lua_State *L)
{
	ltask *t = check_task(L);
	double ms = luaL_optnumber(L, 2, 0);
	if (!(ms >= -1 && ms <= 86400000))
		return luaL_argerror(L, 2, "expected milliseconds (-1 to 86400000)");
	lua_pushboolean(L, t->backend->task_step(t->task, (int)ms) == 1);
	return 1;
}

/* task:result() -> session (an open) | true (a reset) | nil, err, errno_name; finishes the
 * work first if it is not over. */
static int l_task_result(lua_State *L)
{
	ltask *t = check_task(L);
	void *task = t->task;
	t->task = NULL;
	lsession *s = t->opening ? new_session(L, t->backend) : NULL;
	void *handle = NULL;
	lb_error err = {0};
	if (t->backend->task_end(task, &handle, &err) < 0)
		return lb_lua_push_error(L, &err);
	if (s)
		s->handle = handle;
	else
		lua_pushboolean(L, 1);
	return 1;
}

static int l_task_gc(lua_State *L)
{
	ltask *t = luaL_checkudata(L, 1, TASK_MT);
	if (t->task)
		t->backend->task_discard(t->task);
	t->task = NULL;
	return 0;
}

/* A memfd holding data, at offset 0; -1 with err filled. */
static int memfd_of(const char *data, size_t len, lb_error *err)
{
	int fd = memfd_create("llmbox-archive", MFD_CLOEXEC);
	if (fd < 0 || lb_write_all(fd, data, len) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		lb_fail_sys(err, errno, "keeping the archive in memory");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* core.tar_entries(archive [, max]) -> { {name, size, data}, ... } | nil, err, errno_name:
 * an archive someone else made (an engine's GET .../archive), read by lb_tar_entries. */
static int l_tar_entries(lua_State *L)
{
	size_t len;
	const char *data = luaL_checklstring(L, 1, &len);
	double max = luaL_optnumber(L, 2, 0);
	if (!(max >= 0 && max <= 9007199254740992.0))
		return luaL_argerror(L, 2, "expected a byte count (0 for no limit)");
	lb_error err = {0};
	int fd = memfd_of(data, len, &err);
	if (fd < 0)
		return lb_lua_push_error(L, &err);
	lua_newtable(L);
	struct collected c = {.L = L};
	int rc = lb_tar_entries(fd, (uint64_t)max, collect_entry, &c, &err);
	close(fd);
	return rc < 0 ? lb_lua_push_error(L, &err) : 1;
}

/* core.tar_extract(archive, host_path [, max]) -> true [, skipped] | nil, err, errno_name: a
 * foreign archive received at host_path as copy_out receives one (lb_tar_extract). */
static int l_tar_extract(lua_State *L)
{
	size_t len;
	const char *data = luaL_checklstring(L, 1, &len);
	const char *host_path = luaL_checkstring(L, 2);
	double max = luaL_optnumber(L, 3, 0);
	if (!(max >= 0 && max <= 9007199254740992.0))
		return luaL_argerror(L, 3, "expected a byte count (0 for no limit)");
	lb_error err = {0};
	int fd = memfd_of(data, len, &err);
	if (fd < 0)
		return lb_lua_push_error(L, &err);
	char skipped[2048] = "";
	int rc = lb_tar_extract(fd, host_path, (uint64_t)max, skipped, sizeof skipped, &err);
	close(fd);
	if (rc < 0)
		return lb_lua_push_error(L, &err);
	lua_pushboolean(L, 1);
	return 1 + push_skipped(L, skipped);
}

/* core.tar_host(host_path [, root]) -> archive [, { skipped name, ... }] | nil, err, errno_name:
 * what copy_in would send of a host file or directory (lb_tar_host); root "." names the entries
 * "./..." (a build context). */
static int l_tar_host(lua_State *L)
{
	const char *host_path = luaL_checkstring(L, 1);
	const char *root = luaL_optstring(L, 2, NULL);
	char *out, skipped[2048] = "";
	size_t len;
	lb_error err = {0};
	if (lb_tar_host(host_path, root, &out, &len, skipped, sizeof skipped, &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushlstring(L, out, len);
	free(out);
	return 1 + push_skipped(L, skipped);
}

/* A digest as lower-case hex. */
static int push_hex(lua_State *L, const unsigned char *md, unsigned int len)
{
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	for (unsigned int i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	lua_pushlstring(L, hex, 2 * (size_t)len);
	return 1;
}

/* core.layer_apply(archive_path, root_dir, max_bytes [, total]) -> total, skipped | nil, err:
 * one image layer onto a root filesystem being built (lb_layer_apply); total: the bytes the
 * layers before it wrote (the bound is the whole image's) */
static int l_layer_apply(lua_State *L)
{
	const char *archive = luaL_checkstring(L, 1), *root = luaL_checkstring(L, 2);
	uint64_t max = (uint64_t)luaL_checknumber(L, 3), total = (uint64_t)luaL_optnumber(L, 4, 0);
	lb_error err = {0};
	_cleanup_fd_ int in = open(archive, O_RDONLY | O_CLOEXEC);
	_cleanup_fd_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (in < 0 || rfd < 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s: %s", in < 0 ? archive : root, strerror(errno));
		return 2;
	}
	char skipped[4096] = "";
	if (lb_layer_apply(in, rfd, max, &total, skipped, sizeof skipped, &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushnumber(L, (double)total);
	return 1 + push_skipped(L, skipped);
}

/* core.sha256_file(path) -> hex | nil, err: the digest of a file's content, read in blocks */
static int l_sha256_file(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	lb_error err;
	if (lb_lazy_crypto(&err) < 0) {
		lua_pushnil(L);
		lua_pushstring(L, err.msg);
		return 2;
	}
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	EVP_MD_CTX *ctx = fd >= 0 ? EVP_MD_CTX_new() : NULL;
	if (!ctx) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s: %s", path, strerror(fd < 0 ? errno : ENOMEM));
		return 2;
	}
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	int ok = n == 0 && EVP_DigestFinal_ex(ctx, md, &len) == 1;
	EVP_MD_CTX_free(ctx);
	if (!ok) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s: reading it failed", path);
		return 2;
	}
	return push_hex(L, md, len);
}

/* core.jail_etc(hostname) -> { { path = "/etc/NAME", data = ... }, ... } (lb_jail_etc) */
static int l_jail_etc(lua_State *L)
{
	const char *hostname = luaL_checkstring(L, 1);
	const char *name, *content;
	char buf[512];
	lua_newtable(L);
	for (size_t i = 0; lb_jail_etc(i, hostname, &name, &content, buf, sizeof buf); i++) {
		lua_createtable(L, 0, 2);
		lua_pushfstring(L, "/etc/%s", name);
		lua_setfield(L, -2, "path");
		lua_pushstring(L, content);
		lua_setfield(L, -2, "data");
		lua_rawseti(L, -2, (int)i + 1);
	}
	return 1;
}

/* core.readlink(path) -> target | nil, err, errno_name ("EINVAL": not a link) */
static int l_readlink(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	char buf[PATH_MAX];
	ssize_t n = readlink(path, buf, sizeof buf - 1);
	if (n < 0) {
		lb_error err;
		lb_fail_sys(&err, errno, "readlink %s", path);
		return lb_lua_push_error(L, &err);
	}
	lua_pushlstring(L, buf, (size_t)n);
	return 1;
}

/* core.resolve_in_root(root, path) -> host path | nil, err: what path names inside root, as a
 * chroot to root would resolve it (lb_resolve_in_root) */
static int l_resolve_in_root(lua_State *L)
{
	const char *root = luaL_checkstring(L, 1), *path = luaL_checkstring(L, 2);
	char out[PATH_MAX];
	if (lb_resolve_in_root(root, path, out, sizeof out) < 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s in %s: %s", path, root, strerror(errno));
		return 2;
	}
	lua_pushstring(L, out);
	return 1;
}

/* core.cell_parse(buf, tag) -> n [, answer]: the first answer of an interactive program in buf
 * (lb_cell_parse): 0 when more bytes are needed, -1 when it is malformed, else the bytes it took
 * and { matches, status, cpu_us, plots, value }. For drivers that carry the control channel
 * themselves (the container engines' cells). */
static int l_cell_parse(lua_State *L)
{
	size_t len;
	const char *buf = luaL_checklstring(L, 1, &len);
	const char *tag = luaL_checkstring(L, 2);
	struct lb_cell_answer a;
	long n = lb_cell_parse(buf, len, tag, &a);
	lua_pushinteger(L, n);
	if (n <= 0)
		return 1;
	lua_createtable(L, 0, 5);
	lua_pushboolean(L, a.matches);
	lua_setfield(L, -2, "matches");
	lua_pushinteger(L, a.status);
	lua_setfield(L, -2, "status");
	lua_pushnumber(L, (double)a.cpu_us);
	lua_setfield(L, -2, "cpu_us");
	lua_pushboolean(L, a.plots);
	lua_setfield(L, -2, "plots");
	lua_pushlstring(L, a.value, a.value_len);
	lua_setfield(L, -2, "value");
	return 2;
}

/* core.tar_pack(files [, uid, gid]) -> archive | nil, err, errno_name: files ({ path, data,
 * mode }, as a run's) as a tar archive for a container's `tar -x -C /` (lb_tar_pack). */
static int l_tar_pack(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	double uid = luaL_optnumber(L, 2, 0), gid = luaL_optnumber(L, 3, 0);
	if (!(uid >= 0 && uid <= 4294967294.0 && gid >= 0 && gid <= 4294967294.0))
		return luaL_argerror(L, 2, "expected ids below 4294967295");
	lua_createtable(L, 0, 1);
	lua_pushvalue(L, 1);
	lua_setfield(L, -2, "files");
	size_t n;
	const lb_file *files = read_files(L, lua_gettop(L), &n);
	char *out;
	size_t len;
	lb_error err = {0};
	if (lb_tar_pack(files, n, (uid_t)uid, (gid_t)gid, &out, &len, &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushlstring(L, out, len);
	free(out);
	return 1;
}

/* core.sha256(data) -> the SHA-256 of data, in lowercase hex */
static int l_sha256(lua_State *L)
{
	size_t len;
	const char *data = luaL_checklstring(L, 1, &len);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	lb_error err;
	if (lb_lazy_crypto(&err) < 0)
		return luaL_error(L, "core.sha256: %s", err.msg);
	if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1)
		return luaL_error(L, "core.sha256: OpenSSL's digest failed");
	return push_hex(L, md, n);
}

static int l_close(lua_State *L)
{
	lsession *s = luaL_checkudata(L, 1, SESSION_MT);
	if (s->handle) {
		s->backend->close(s->handle);
		s->handle = NULL;
	}
	return 0;
}

static int l_closed(lua_State *L)
{
	lsession *s = luaL_checkudata(L, 1, SESSION_MT);
	lua_pushboolean(L, s->handle == NULL);
	return 1;
}

/* core.reap([block]): collect what finished prestarted runs left (see lb_reap) */
static int l_reap(lua_State *L)
{
	lb_reap(lua_toboolean(L, 1));
	return 0;
}

/* core.set_run_helper(path) -> resolved path | nil, err, errno_name: where llmbox-run is */
static int l_set_run_helper(lua_State *L)
{
	lb_error err;
	if (lb_set_run_helper(luaL_checkstring(L, 1), &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushstring(L, lb_run_helper());
	return 1;
}

/* When the Lua state closes (the CLI's end, luajit's, an nginx worker's): every process llmbox
 * started is reaped by llmbox, not left to whoever inherits them. */
static int l_reap_all(lua_State *L)
{
	(void)L;
	lb_reap(true);
	return 0;
}

static int l_backends(lua_State *L)
{
	static const struct {
		unsigned cap;
		const char *name;
	} caps[] = {
#define CAP_ENTRY(bit, name) {bit, name},
		LB_CAP_NAMES(CAP_ENTRY)
#undef CAP_ENTRY
	};
	lua_newtable(L);
	for (const lb_backend *const *b = lb_backends; *b; b++) {
		lua_newtable(L);
		for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
			lua_pushboolean(L, ((*b)->caps & caps[i].cap) != 0);
			lua_setfield(L, -2, caps[i].name);
		}
		lua_setfield(L, -2, (*b)->name);
	}
	return 1;
}

static int l_probe(lua_State *L)
{
	lb_probe p;
	lb_probe_host(&p);
	lua_newtable(L);
#define BOOL(f)                                                                                    \
	lua_pushboolean(L, p.f);                                                                   \
	lua_setfield(L, -2, #f)
#define STR(f)                                                                                     \
	lua_pushstring(L, p.f);                                                                    \
	lua_setfield(L, -2, #f)
	BOOL(is_root);
	BOOL(userns);
	STR(userns_error);
	BOOL(seccomp);
	BOOL(mount_setattr);
	BOOL(openat2);
	BOOL(cgroup_memory);
	BOOL(cgroup_pids);
	BOOL(cgroup_cpu);
	BOOL(cgroup_cpuacct);
	STR(cgroup_note);
	STR(kernel);
	lua_pushinteger(L, p.cgroup_version);
	lua_setfield(L, -2, "cgroup_version");
	return 1;
}

/* core.cgroup() -> version (0: none usable), memory, pids, note, cpu: cheap, no fork. */
static int l_cgroup(lua_State *L)
{
	lb_cgroup_support cg;
	lb_cgroup_detect(&cg);
	lua_pushinteger(L, cg.version);
	lua_pushboolean(L, cg.memory);
	lua_pushboolean(L, cg.pids);
	lua_pushstring(L, cg.note);
	lua_pushboolean(L, cg.cpu);
	return 5;
}

/* core.filter_program(syscalls) -> bytes | nil, err: the seccomp program a native jail loads
 * for these rules, as struct sock_filter bytes (for sandboxes llmbox does not start itself). */
static int l_filter_program(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lb_syscall_policy sp = {0};
	read_syscalls(L, 1, &sp);
	lb_error err = {0};
	lb_filter *f = lb_filter_build(&sp, &err);
	if (!f)
		return lb_lua_push_error(L, &err);
	size_t len;
	const void *prog = lb_filter_program(f, &len);
	lua_pushlstring(L, prog, len);
	lb_filter_free(f);
	return 1;
}

/* core.socket_family(name) -> AF_* number | nil (core.AF_MAX: the first number Linux lacks) */
static int l_socket_family(lua_State *L)
{
	int family = lb_socket_family(luaL_checkstring(L, 1));
	if (family < 0)
		lua_pushnil(L);
	else
		lua_pushinteger(L, family);
	return 1;
}

static int l_syscall_number(lua_State *L)
{
	int nr = lb_syscall_number(luaL_checkstring(L, 1));
	if (nr < 0)
		lua_pushnil(L);
	else
		lua_pushinteger(L, nr);
	return 1;
}

/* core.syscall_names() -> { name, ... }: every syscall of the native architecture libseccomp
 * knows, by number (for profiles that must list what an allow-list leaves out). */
static int l_syscall_names(lua_State *L)
{
	lua_newtable(L);
	int n = 0;
	for (int nr = 0; nr < 1024; nr++) {
		const char *name = lb_syscall_name(nr);
		if (name) {
			lua_pushstring(L, name);
			lua_rawseti(L, -2, ++n);
		}
	}
	return 1;
}

static int l_ioctl_number(lua_State *L)
{
	unsigned long nr = lb_ioctl_number(luaL_checkstring(L, 1));
	if (!nr)
		lua_pushnil(L);
	else
		lua_pushnumber(L, (double)nr);
	return 1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int l_listdir(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	DIR *d = opendir(path);
	if (!d) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s: %s", path, strerror(errno));
		return 2;
	}
	lua_newtable(L);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.') {
			lua_pushstring(L, e->d_name);
			lua_rawseti(L, -2, ++n);
		}
	closedir(d);
	/* Sort in Lua-independent C order so listings are stable. */
	const char **names = lua_newuserdata(L, (size_t)(n ? n : 1) * sizeof *names);
	for (int i = 0; i < n; i++) {
		lua_rawgeti(L, -2, i + 1);
		names[i] = lua_tostring(L, -1);
		lua_pop(L, 1); /* still referenced by the table */
	}
	qsort(names, (size_t)n, sizeof *names, cmp_str);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		lua_pushstring(L, names[i]);
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

int luaopen_llmbox_core(lua_State *L)
{
	static const luaL_Reg session_methods[] = {{"run", l_run},
						   {"copy_in", l_copy_in},
						   {"copy_out", l_copy_out},
						   {"close", l_close},
						   {"closed", l_closed},
						   {"prestart", l_prestart},
						   {"reset", l_reset},
						   {"start", l_start},
						   {"collect", l_collect},
						   {"reset_start", l_reset_start},
						   {"egress", l_egress},
						   {"egress_denied", l_egress_denied},
						   {NULL, NULL}};
	static const luaL_Reg pending_methods[] = {
		{"wait", l_pending_wait},	{"finish", l_pending_finish},
		{"abandon", l_pending_abandon}, {"start", l_pending_start},
		{"cell", l_pending_cell},	{NULL, NULL}};
	static const luaL_Reg funcs[] = {{"open", l_open},
					 {"open_start", l_open_start},
					 {"backends", l_backends},
					 {"probe", l_probe},
					 {"syscall_number", l_syscall_number},
					 {"filter_program", l_filter_program},
					 {"socket_family", l_socket_family},
					 {"syscall_names", l_syscall_names},
					 {"ioctl_number", l_ioctl_number},
					 {"listdir", l_listdir},
					 {"cgroup", l_cgroup},
					 {"reap", l_reap},
					 {"set_run_helper", l_set_run_helper},
					 {"spawn", l_spawn},
					 {"tar_entries", l_tar_entries},
					 {"tar_pack", l_tar_pack},
					 {"cell_parse", l_cell_parse},
					 {"resolve_in_root", l_resolve_in_root},
					 {"readlink", l_readlink},
					 {"jail_etc", l_jail_etc},
					 {"layer_apply", l_layer_apply},
					 {"sha256_file", l_sha256_file},
					 {"tar_host", l_tar_host},
					 {"tar_extract", l_tar_extract},
					 {"sha256", l_sha256},
					 {"http_request_parser", lb_lua_http_request_parser},
					 {"http_response_parser", lb_lua_http_response_parser},
					 {NULL, NULL}};
	lb_lua_class(L, SESSION_MT, session_methods, l_close);
	lb_lua_class(L, PENDING_MT, pending_methods, l_pending_gc);
	static const luaL_Reg run_methods[] = {{"fds", l_run_fds},	 {"step", l_run_step},
					       {"take", l_run_take},	 {"abort", l_run_abort},
					       {"result", l_run_result}, {NULL, NULL}};
	static const luaL_Reg task_methods[] = {{"fds", l_task_fds},
						{"step", l_task_step},
						{"result", l_task_result},
						{NULL, NULL}};
	lb_lua_class(L, RUN_MT, run_methods, l_run_gc);
	lb_lua_class(L, TASK_MT, task_methods, l_task_gc);
	if (luaL_newmetatable(L, "llmbox.core.reaper")) {
		lua_pushcfunction(L, l_reap_all);
		lua_setfield(L, -2, "__gc");
		lua_newuserdata(L, 1);
		lua_pushvalue(L, -2);
		lua_setmetatable(L, -2);
		lua_setfield(L, LUA_REGISTRYINDEX, "llmbox.core.reaper.sentinel");
	}
	lua_pop(L, 1);
	lua_newtable(L);
	luaL_register(L, NULL, funcs);
	lua_pushstring(L, LLMBOX_VERSION);
	lua_setfield(L, -2, "VERSION");
	lua_pushinteger(L, AF_MAX);
	lua_setfield(L, -2, "AF_MAX");
	return 1;
}
