/* Fuzz target "lua_core": the Lua tables that reach C through runtime/lua_core.c, in a real LuaJIT
 * state: core.open(backend, cfg), session:run(spec), session:copy_in/copy_out, close, and the
 * small lookups (backends, syscall_number, ioctl_number).
 *
 * The input becomes a few calls whose arguments are tables of the documented shapes with fields
 * of the right type, of a wrong type (nil, booleans, huge, negative, NaN and infinite numbers,
 * strings with NUL bytes, nested junk, functions, userdata), tables behind an __index proxy, and
 * on_stdout/on_stderr callbacks that fail, collect garbage, close the session or run again.
 * Every call is made under pcall. What must hold: no sanitizer report, and every call either
 * returns its documented values, returns nil, message, errno name, or raises a string error.
 *
 * No jail is ever created: lb_backends[] is defined here instead of linking backends/native.c,
 * so "native" is a fake driver that checks every pointer and string it is given (ASan sees a
 * stale one, since Lua allocates through malloc here), builds the seccomp filter from the
 * parsed policy like the native driver does first, and answers with fuzzed results, errors and
 * output chunks that drive the callbacks. lua_core.c calls the backend only after parsing, so
 * the whole parser runs for every input at the cost of no fork.
 *
 * Known, reported, not fixed yet (LB_FUZZ_SKIP_KNOWN, set by fuzz.mk, leaves them out; the
 * float-to-integer casts of out-of-range numbers are listed in fuzz/ubsan.supp instead):
 *  - index-fresh-string: opt_string/opt_number read fields with lua_getfield, so an __index
 *    function can return a fresh string that nothing references once popped: a later garbage
 *    collection frees what the C config points to (use after free);
 *  - stdin-after-callback: session:run keeps spec.stdin only through the spec table: an output
 *    callback that drops it and collects garbage leaves the supervisor writing freed memory to
 *    the program's stdin;
 *  - error-not-string: an output callback raising a non-string error makes on_output format
 *    lua_tostring() == NULL with "%s". */
#define _GNU_SOURCE
#include "../backends/backend.h"
#include "../runtime/internal.h"

#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <luajit.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

int luaopen_llmbox_core(lua_State *L);

static bool skip_fresh_index, skip_stdin, skip_error_table;

/* ---- the input, shared by the table generator and the fake backend ---- */

static const uint8_t *in_p;
static size_t in_n;

static unsigned u8(void)
{
	if (!in_n)
		return 0;
	in_n--;
	return *in_p++;
}

static size_t take(char *out, size_t max)
{
	size_t len = u8() % (max + 1);
	if (len > in_n)
		len = in_n;
	memcpy(out, in_p, len);
	in_p += len;
	in_n -= len;
	return len;
}

/* ---- the fake backend ---- */

static volatile unsigned sink;

/* Reads every byte, so ASan reports a pointer into freed or foreign memory. */
static void touch_mem(const void *p, size_t n)
{
	const volatile unsigned char *b = p;
	unsigned x = 0;
	for (size_t i = 0; i < n; i++)
		x += b[i];
	sink = x;
}

static size_t touch(const char *s)
{
	if (!s)
		abort();
	size_t n = strlen(s);
	touch_mem(s, n + 1);
	return n;
}

static void touch_vector(const char *const *v, size_t n)
{
	if (n && !v)
		abort();
	for (size_t i = 0; i < n; i++)
		touch(v[i]);
	if (v && v[n])
		abort(); /* string_array's vectors are NULL-terminated */
}

static void fuzzed_error(lb_error *err)
{
	static const int codes[] = {0, EINVAL, ENOENT, EPERM, ENOMEM, 4095, -3, INT_MAX};
	err->code = codes[u8() % (sizeof codes / sizeof codes[0])];
	size_t len = take(err->msg, 80);
	err->msg[len] = '\0';
	for (char *c = err->msg; (c = strchr(c, '('));) /* "(null)" must come from lua_core.c */
		*c = '[';
}

#define SESSION_MAGIC 0x5e551011u

struct fake_session {
	unsigned magic;
};

static void *fake_open(const lb_open_config *cfg, lb_error *err)
{
	const lb_jail_config *j = &cfg->jail;
	if (j->n_ro && !j->ro)
		abort();
	for (size_t i = 0; i < j->n_ro; i++) {
		touch(j->ro[i].src);
		touch(j->ro[i].dst);
		if (j->ro[i].src[0] != '/' || j->ro[i].dst[0] != '/')
			abort();
	}
	touch(j->hostname);
	const lb_syscall_policy *p = &cfg->syscalls;
	touch_vector(p->deny, p->n_deny);
	touch_vector(p->allow, p->n_allow);
	for (size_t i = 0; i < p->n_deny_ioctls; i++)
		if (!p->deny_ioctls[i])
			abort();
	unsigned what = u8();
	if (what % 4 == 0) { /* as the native driver does first */
		lb_filter *f = lb_filter_build(p, err);
		if (!f) {
			if (!memchr(err->msg, '\0', sizeof err->msg))
				abort();
			return NULL;
		}
		lb_filter_free(f);
	}
	if (what & 0x10) {
		fuzzed_error(err);
		return NULL;
	}
	struct fake_session *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	s->magic = SESSION_MAGIC;
	return s;
}

static struct fake_session *session(void *s)
{
	struct fake_session *f = s;
	if (!f || f->magic != SESSION_MAGIC)
		abort();
	return f;
}

static char *fuzzed_output(size_t *len)
{
	char buf[256];
	*len = take(buf, 255);
	char *out = malloc(*len + 1);
	if (!out)
		abort();
	memcpy(out, buf, *len);
	out[*len] = '\0';
	return out;
}

static int fake_run(void *sv, const lb_run_spec *spec, lb_result *res, lb_error *err)
{
	session(sv);
	if (!spec->argv || !spec->argv[0])
		abort(); /* l_run refuses an empty argv */
	size_t argc = 0;
	while (spec->argv[argc])
		touch(spec->argv[argc++]);
	for (size_t i = 0; spec->envp && spec->envp[i]; i++)
		touch(spec->envp[i]);
	if (spec->cwd)
		touch(spec->cwd);
	if (spec->stdin_data)
		touch_mem(spec->stdin_data, spec->stdin_len);
	if (spec->n_files && !spec->files)
		abort();
	for (size_t i = 0; i < spec->n_files; i++) {
		if (touch(spec->files[i].path) == 0 || spec->files[i].path[0] != '/')
			abort();
		touch_mem(spec->files[i].data, spec->files[i].len);
	}
	memset(res, 0, sizeof *res);
	/* Output arrives while the supervisor keeps feeding stdin; the session may be closed by a
	 * callback, so it is not looked at again (lb_run does not either). */
	for (unsigned k = u8() % 4; k > 0; k--) {
		char chunk[128];
		size_t len = take(chunk, sizeof chunk);
		enum lb_stream st = u8() & 1 ? LB_STDOUT : LB_STDERR;
		int stop = spec->on_output ? spec->on_output(spec->ud, st, chunk, len) : 0;
		if (spec->stdin_data)
			touch_mem(spec->stdin_data, spec->stdin_len);
		if (stop)
			return lb_fail(err, ECANCELED, "the output callback failed");
	}
	if (u8() % 8 == 0) {
		fuzzed_error(err);
		return -1;
	}
	res->exit_code = (int)u8() - 1;
	res->signal = (int)(u8() % 70);
	res->limit = (enum lb_limit)(u8() % 10); /* out of range too: lb_limit_name says NULL */
	res->truncated = u8() & 1;
	res->duration_ms = (double)u8() / 3;
	res->cpu_ms = u8() == 7 ? NAN : 1.5;
	res->max_rss = (uint64_t)u8() << 56;
	res->out = fuzzed_output(&res->out_len);
	res->err = fuzzed_output(&res->err_len);
	return 0;
}

static int fake_copy(void *sv, const char *a, const char *b, char *skipped, size_t skipped_len,
		     lb_error *err)
{
	session(sv);
	touch(a);
	touch(b);
	if (!skipped || skipped_len < 2)
		abort();
	if (u8() % 3 == 0) {
		fuzzed_error(err);
		return -1;
	}
	/* Entries that were not copied, newline-separated (empty lines and NULs too). */
	size_t n = take(skipped, skipped_len - 1 < 300 ? skipped_len - 1 : 300);
	skipped[n] = '\0';
	return 0;
}

static int fake_copy_in(void *s, const char *host_path, const char *path, unsigned mode,
			char *skipped, size_t skipped_len, lb_error *err)
{
	(void)mode;
	return fake_copy(s, host_path, path, skipped, skipped_len, err);
}

static int fake_copy_out(void *s, const char *path, const char *host_path, uint64_t max,
			 char *skipped, size_t skipped_len, lb_error *err)
{
	(void)max;
	return fake_copy(s, path, host_path, skipped, skipped_len, err);
}

static void fake_close(void *s)
{
	session(s)->magic = 0;
	free(s);
}

static const lb_backend fake_native = {
	.name = "native",
	.caps = LB_CAP_POOL | LB_CAP_PERSISTENT_WORKSPACE | LB_CAP_NETWORK_POLICY | LB_CAP_SECCOMP,
	.open = fake_open,
	.run = fake_run,
	.copy_in = fake_copy_in,
	.copy_out = fake_copy_out,
	.close = fake_close,
};

static const lb_backend fake_other = {
	.name = "other",
	.caps = 0,
	.open = fake_open,
	.run = fake_run,
	.copy_in = fake_copy_in,
	.copy_out = fake_copy_out,
	.close = fake_close,
};

const lb_backend *const lb_backends[] = {&fake_native, &fake_other, NULL};

/* ---- Lua values from the input ---- */

static const char *const words[] = {
	"native",     "other",	 "",	      "/",	   "/usr",     "/usr/bin", "/sandbox",
	"/sandbox/x", "x",	 "..",	      "/../etc",   "deny",     "allow",	   "kill",
	"errno",      "read",	 "write",     "clone",	   "clone3",   "ioctl",	   "openat",
	"socketcall", "TIOCSTI", "TIOCLINUX", "TIOCSETD",  "TIOCCONS", "FIONREAD", "PATH=/usr/bin",
	"/bin/sh",    "python3", "/tmp/x",    "%s%s%n",	   "123",      "0x10",	   "-1",
	"1e400",      "nan",	 "hostname",  "/dev/null", "src",      "\n",	   "a=b",
};

static void push_number(lua_State *L)
{
	static const double nums[] = {0,
				      -0.0,
				      1,
				      -1,
				      0.5,
				      420,
				      65534,
				      2147483647.0,
				      2147483648.0,
				      4294967295.0,
				      4294967296.0,
				      9007199254740993.0,
				      9223372036854775808.0,
				      18446744073709551616.0,
				      1e300,
				      -1e300,
				      1e-300,
				      268435456,
				      INFINITY,
				      -INFINITY,
				      NAN};
	unsigned k = u8();
	if (k < 200) {
		lua_pushnumber(L, nums[k % (sizeof nums / sizeof nums[0])]);
	} else if (k < 240) {
		lua_pushnumber(L, (double)u8());
	} else {
		uint64_t bits = 0;
		for (int i = 0; i < 8; i++)
			bits |= (uint64_t)u8() << (8 * i);
		double d;
		memcpy(&d, &bits, sizeof d);
		lua_pushnumber(L, d);
	}
}

static void push_string(lua_State *L)
{
	unsigned k = u8();
	char buf[512];
	if (k < 150) {
		lua_pushstring(L, words[k % (sizeof words / sizeof words[0])]);
	} else if (k < 200) { /* a word with raw bytes after it, NULs included */
		const char *w = words[u8() % (sizeof words / sizeof words[0])];
		size_t wl = strlen(w);
		memcpy(buf, w, wl);
		size_t n = take(buf + wl, 40);
		lua_pushlstring(L, buf, wl + n);
	} else if (k < 250) {
		size_t n = take(buf, 64);
		lua_pushlstring(L, buf, n);
	} else { /* long: beyond NAME_MAX, and a full error message */
		size_t n = 200 + u8() * 4;
		luaL_Buffer b;
		luaL_buffinit(L, &b);
		for (size_t i = 0; i < n; i++)
			luaL_addchar(&b, "/ab"[i % 3]);
		luaL_pushresult(&b);
	}
}

/* Callbacks: what on_stdout/on_stderr do, chosen by the upvalue. */
enum cb_kind {
	CB_NOTHING,
	CB_ERROR,
	CB_DROP_SPEC, /* drops argv, env, files, cwd from the spec and collects: all harmless */
	CB_COLLECT,
	CB_CLOSE,
	CB_NESTED_RUN,
	CB_RETURN_VALUES,
	CB_DROP_STDIN,	/* known bug: stdin is then freed under the supervisor */
	CB_ERROR_TABLE, /* known bug: "%s" with NULL */
	CB_KINDS,
};

static int nested_depth;

static int callback(lua_State *L)
{
	enum cb_kind kind = (enum cb_kind)lua_tointeger(L, lua_upvalueindex(1));
	if (lua_type(L, 1) != LUA_TSTRING)
		abort(); /* the chunk */
	switch (kind) {
	case CB_ERROR:
		return luaL_error(L, "callback failed on purpose");
	case CB_ERROR_TABLE:
		lua_newtable(L);
		return lua_error(L);
	case CB_DROP_SPEC:
	case CB_DROP_STDIN:
		lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.spec");
		if (lua_istable(L, -1)) {
			static const char *const drop[] = {"argv", "env", "files", "cwd"};
			for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) {
				lua_pushnil(L);
				lua_setfield(L, -2, drop[i]);
			}
			if (kind == CB_DROP_STDIN) {
				lua_pushnil(L);
				lua_setfield(L, -2, "stdin");
			}
		}
		lua_gc(L, LUA_GCCOLLECT, 0);
		return 0;
	case CB_COLLECT:
		lua_gc(L, LUA_GCCOLLECT, 0);
		return 0;
	case CB_CLOSE:
		lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.session");
		if (lua_isuserdata(L, -1)) {
			lua_getfield(L, -1, "close");
			lua_pushvalue(L, -2);
			lua_call(L, 1, 0);
		}
		return 0;
	case CB_NESTED_RUN:
		if (nested_depth >= 2)
			return 0;
		lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.session");
		if (!lua_isuserdata(L, -1))
			return 0;
		lua_getfield(L, -1, "run");
		lua_pushvalue(L, -2);
		lua_createtable(L, 0, 1);
		lua_createtable(L, 1, 0);
		lua_pushstring(L, "nested");
		lua_rawseti(L, -2, 1);
		lua_setfield(L, -2, "argv");
		nested_depth++;
		lua_call(L, 2, 0); /* errors propagate to the outer on_output's pcall */
		nested_depth--;
		return 0;
	case CB_RETURN_VALUES:
		lua_pushboolean(L, 1);
		lua_pushstring(L, "ignored");
		return 2;
	default:
		return 0;
	}
}

static void push_value(lua_State *L, int depth);

static void push_callback(lua_State *L)
{
	enum cb_kind kind = (enum cb_kind)(u8() % CB_KINDS);
	if (kind == CB_DROP_STDIN && skip_stdin)
		kind = CB_DROP_SPEC;
	if (kind == CB_ERROR_TABLE && skip_error_table)
		kind = CB_ERROR;
	lua_pushinteger(L, (lua_Integer)kind);
	lua_pushcclosure(L, callback, 1);
}

static void push_junk_table(lua_State *L, int depth)
{
	unsigned n = u8() % 6;
	lua_createtable(L, (int)n, 2);
	for (unsigned i = 1; i <= n; i++) {
		push_value(L, depth + 1);
		lua_rawseti(L, -2, (int)i);
	}
	if (u8() & 1) { /* a hole, then a far index: objlen may see either end */
		push_value(L, depth + 1);
		lua_rawseti(L, -2, (int)(n + 2 + u8() % 3));
	}
	if (u8() & 1) {
		push_string(L);
		push_value(L, depth + 1);
		lua_rawset(L, -3);
	}
}

/* Any value at all: the wrong type for whatever field it lands in, most of the time. */
static void push_value(lua_State *L, int depth)
{
	switch (u8() % 10) {
	case 0:
		lua_pushnil(L);
		break;
	case 1:
		lua_pushboolean(L, u8() & 1);
		break;
	case 2:
	case 3:
		push_number(L);
		break;
	case 4:
	case 5:
		push_string(L);
		break;
	case 6:
	case 7:
		if (depth < 3)
			push_junk_table(L, depth);
		else
			lua_pushnil(L);
		break;
	case 8:
		push_callback(L);
		break;
	default:
		if (u8() & 1) {
			lua_pushlightuserdata(L, (void *)&sink);
		} else {
			lua_getfield(L, LUA_REGISTRYINDEX,
				     "fuzz.session"); /* wrong udata, or nil */
		}
		break;
	}
}

/* ---- the documented shapes ---- */

enum kind { K_NUM, K_STR, K_BOOL, K_STRARR, K_TABLE, K_TABARR, K_FUNC };

struct field {
	const char *key;
	enum kind kind;
	const struct field *sub;
};

static const struct field mount_fields[] = {
	{"src", K_STR, NULL}, {"dst", K_STR, NULL}, {"optional", K_BOOL, NULL}, {NULL, 0, NULL}};
static const struct field syscall_fields[] = {
	{"default", K_STR, NULL}, {"action", K_STR, NULL},   {"deny_namespace_clone", K_BOOL, NULL},
	{"deny", K_STRARR, NULL}, {"allow", K_STRARR, NULL}, {"deny_ioctls", K_STRARR, NULL},
	{NULL, 0, NULL}};
static const struct field cfg_fields[] = {{"workspace", K_NUM, NULL},
					  {"tmp", K_NUM, NULL},
					  {"hostname", K_STR, NULL},
					  {"host_uid", K_NUM, NULL},
					  {"host_gid", K_NUM, NULL},
					  {"ro", K_TABARR, mount_fields},
					  {"syscalls", K_TABLE, syscall_fields},
					  {NULL, 0, NULL}};
static const struct field file_fields[] = {
	{"path", K_STR, NULL}, {"data", K_STR, NULL}, {"mode", K_NUM, NULL}, {NULL, 0, NULL}};
static const struct field limit_fields[] = {{"timeout", K_NUM, NULL},	 {"cpu", K_NUM, NULL},
					    {"memory", K_NUM, NULL},	 {"processes", K_NUM, NULL},
					    {"open_files", K_NUM, NULL}, {"file_size", K_NUM, NULL},
					    {"output", K_NUM, NULL},	 {NULL, 0, NULL}};
static const struct field spec_fields[] = {{"argv", K_STRARR, NULL},
					   {"env", K_STRARR, NULL},
					   {"cwd", K_STR, NULL},
					   {"stdin", K_STR, NULL},
					   {"files", K_TABARR, file_fields},
					   {"limits", K_TABLE, limit_fields},
					   {"on_stdout", K_FUNC, NULL},
					   {"on_stderr", K_FUNC, NULL},
					   {NULL, 0, NULL}};

static void push_shaped(lua_State *L, const struct field *fields, int depth);

/* Known bug: an __index function returning strings nothing else references, collecting
 * garbage on every call (see the header). */
static int fresh_index(lua_State *L)
{
	static unsigned counter;
	const char *key = lua_tostring(L, 2);
	lua_gc(L, LUA_GCCOLLECT, 0);
	if (!key || !strcmp(key, "ro") || !strcmp(key, "syscalls") || !strcmp(key, "files") ||
	    !strcmp(key, "limits") || !strcmp(key, "argv") || !strcmp(key, "env"))
		return 0;
	lua_pushfstring(L, "/fresh/%s/%d", key, (int)++counter);
	return 1;
}

static void push_typed(lua_State *L, const struct field *f, int depth)
{
	switch (f->kind) {
	case K_NUM:
		push_number(L);
		break;
	case K_STR:
		push_string(L);
		break;
	case K_BOOL:
		lua_pushboolean(L, u8() & 1);
		break;
	case K_STRARR: {
		unsigned n = u8();
		n = n == 255 ? 300 : n % 8; /* sometimes a long list */
		lua_createtable(L, (int)n, 0);
		for (unsigned i = 1; i <= n; i++) {
			if (u8() % 16 == 0)
				push_value(L, depth + 1);
			else
				push_string(L);
			lua_rawseti(L, -2, (int)i);
		}
		break;
	}
	case K_TABLE:
		push_shaped(L, f->sub, depth + 1);
		break;
	case K_TABARR: {
		unsigned n = u8() % 5;
		lua_createtable(L, (int)n, 0);
		for (unsigned i = 1; i <= n; i++) {
			if (u8() % 8 == 0)
				push_value(L, depth + 1);
			else
				push_shaped(L, f->sub, depth + 1);
			lua_rawseti(L, -2, (int)i);
		}
		break;
	}
	case K_FUNC:
		push_callback(L);
		break;
	}
}

/* A table of the given shape: each field absent, of its type, or junk; a few extra keys; and
 * sometimes behind an __index proxy. */
static void push_shaped(lua_State *L, const struct field *fields, int depth)
{
	lua_newtable(L);
	if (depth > 4)
		return;
	for (const struct field *f = fields; f->key; f++) {
		unsigned sel = u8() % 8;
		if (sel == 0)
			continue;
		if (sel == 1)
			push_value(L, depth + 1);
		else
			push_typed(L, f, depth);
		lua_setfield(L, -2, f->key);
	}
	for (unsigned extra = u8() % 4; extra == 3 && in_n;) { /* unknown keys */
		push_string(L);
		push_value(L, depth + 1);
		lua_rawset(L, -3);
		extra = u8() % 4;
	}
	unsigned proxy = u8() % 16;
	if (proxy == 1 || (proxy == 2 && !skip_fresh_index)) {
		lua_newtable(L);	  /* the proxy, empty */
		lua_createtable(L, 0, 1); /* its metatable */
		if (proxy == 1)
			lua_pushvalue(L, -3); /* __index = the real table: values stay referenced */
		else
			lua_pushcfunction(L, fresh_index);
		lua_setfield(L, -2, "__index");
		lua_setmetatable(L, -2);
		lua_remove(L, -2);
	}
}

/* ---- calls and what their results must look like ---- */

static void check_error_value(lua_State *L, const char *what)
{
	if (lua_type(L, -1) != LUA_TSTRING) {
		fprintf(stderr, "fuzz_lua_core: %s raised a %s, not a message\n", what,
			luaL_typename(L, -1));
		abort();
	}
}

/* nil, message, errno name */
static bool is_soft_error(lua_State *L, int base, int n)
{
	if (n != 3 || !lua_isnil(L, base + 1) || lua_type(L, base + 2) != LUA_TSTRING ||
	    lua_type(L, base + 3) != LUA_TSTRING)
		return false;
	const char *name = lua_tostring(L, base + 3);
	if (name[0] != 'E')
		return false;
	/* Anchored: a fuzzed policy string may itself contain "callback failed: (null)". */
	const char *msg = lua_tostring(L, base + 2);
	if (!skip_error_table && (!strcmp(msg, "on_stdout callback failed: (null)") ||
				  !strcmp(msg, "on_stderr callback failed: (null)"))) {
		fprintf(stderr, "fuzz_lua_core: message \"%s\"\n", msg);
		abort();
	}
	return true;
}

static void bad_results(lua_State *L, const char *what, int base, int n)
{
	fprintf(stderr, "fuzz_lua_core: %s returned %d values:", what, n);
	for (int i = 1; i <= n; i++)
		fprintf(stderr, " %s", luaL_typename(L, base + i));
	fprintf(stderr, "\n");
	abort();
}

/* Calls the function below nargs arguments on the stack; returns how many results it left, or
 * -1 after checking the error it raised. */
static int call(lua_State *L, int nargs, const char *what)
{
	int base = lua_gettop(L) - nargs - 1;
	if (lua_pcall(L, nargs, LUA_MULTRET, 0) != 0) {
		check_error_value(L, what);
		lua_pop(L, 1);
		return -1;
	}
	return lua_gettop(L) - base;
}

static bool is_session(lua_State *L, int idx)
{
	if (!lua_isuserdata(L, idx) || !lua_getmetatable(L, idx))
		return false;
	luaL_getmetatable(L, "llmbox.core.session");
	bool same = lua_rawequal(L, -1, -2);
	lua_pop(L, 2);
	return same;
}

static void op_open(lua_State *L)
{
	int base = lua_gettop(L);
	lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.core");
	lua_getfield(L, -1, "open");
	lua_remove(L, -2);
	unsigned k = u8() % 16;
	if (k < 12)
		lua_pushstring(L, "native");
	else if (k < 14)
		push_string(L);
	else
		push_value(L, 0);
	if (u8() % 16)
		push_shaped(L, cfg_fields, 0);
	else
		push_value(L, 0);
	int n = call(L, 2, "core.open");
	if (n == 1 && is_session(L, base + 1)) {
		if (u8() & 1) { /* keep it for the calls that follow */
			lua_pushvalue(L, base + 1);
			lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.session");
		}
	} else if (n >= 0 && !is_soft_error(L, base, n)) {
		bad_results(L, "core.open", base, n);
	}
	lua_settop(L, base);
}

/* Pushes the session's method and the session (or junk in its place). */
static bool push_method(lua_State *L, const char *name)
{
	lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.session");
	if (!lua_isuserdata(L, -1)) {
		lua_pop(L, 1);
		return false;
	}
	lua_getfield(L, -1, name);
	lua_insert(L, -2);
	if (u8() % 32 == 0) { /* self of the wrong type */
		lua_pop(L, 1);
		push_value(L, 0);
	}
	return true;
}

static void op_run(lua_State *L)
{
	int base = lua_gettop(L);
	if (!push_method(L, "run"))
		return;
	if (u8() % 16)
		push_shaped(L, spec_fields, 0);
	else
		push_value(L, 0);
	lua_pushvalue(L, -1);
	lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.spec");
	int n = call(L, 2, "session:run");
	if (n == 1 && lua_istable(L, base + 1)) {
		lua_getfield(L, base + 1, "exit_code");
		lua_getfield(L, base + 1, "stdout");
		lua_getfield(L, base + 1, "stderr");
		lua_getfield(L, base + 1, "timed_out");
		if (lua_type(L, -4) != LUA_TNUMBER || lua_type(L, -3) != LUA_TSTRING ||
		    lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TBOOLEAN)
			bad_results(L, "session:run (result fields)", base, n);
	} else if (n >= 0 && !is_soft_error(L, base, n)) {
		bad_results(L, "session:run", base, n);
	}
	lua_settop(L, base);
}

static void op_copy(lua_State *L)
{
	int base = lua_gettop(L);
	bool in = u8() & 1;
	if (!push_method(L, in ? "copy_in" : "copy_out"))
		return;
	int nargs = 1;
	for (unsigned i = 0, n = 2 + u8() % 2; i < n; i++, nargs++) {
		if (u8() % 8 == 0)
			push_value(L, 0);
		else if (i < 2)
			push_string(L);
		else
			push_number(L);
	}
	int n = call(L, nargs, in ? "session:copy_in" : "session:copy_out");
	if (n >= 1 && lua_type(L, base + 1) == LUA_TBOOLEAN && lua_toboolean(L, base + 1)) {
		if (n > 2 || (n == 2 && !lua_istable(L, base + 2)))
			bad_results(L, "session:copy", base, n);
		for (int i = 1; n == 2 && i <= (int)lua_objlen(L, base + 2); i++) {
			lua_rawgeti(L, base + 2, i);
			if (lua_type(L, -1) != LUA_TSTRING || !lua_objlen(L, -1))
				bad_results(L, "session:copy (skipped list)", base, n);
			lua_pop(L, 1);
		}
	} else if (n >= 0 && !is_soft_error(L, base, n)) {
		bad_results(L, "session:copy", base, n);
	}
	lua_settop(L, base);
}

static void op_misc(lua_State *L)
{
	int base = lua_gettop(L);
	static const char *const fns[] = {"syscall_number", "ioctl_number", "backends"};
	unsigned k = u8() % 5;
	if (k < 3) {
		lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.core");
		lua_getfield(L, -1, fns[k]);
		lua_remove(L, -2);
		if (u8() & 1)
			push_string(L);
		else
			push_value(L, 0);
		int n = call(L, 1, fns[k]);
		if (n > 1)
			bad_results(L, fns[k], base, n);
	} else if (push_method(L, k == 3 ? "close" : "closed")) {
		call(L, 1, "session:close");
	}
	lua_settop(L, base);
}

static int body(lua_State *L)
{
	lua_pushcfunction(L, luaopen_llmbox_core);
	lua_call(L, 0, 1);
	lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.core");
	for (int ops = 0; ops < 8 && in_n; ops++) {
		switch (u8() % 8) {
		case 0:
		case 1:
		case 2:
			op_open(L);
			break;
		case 3:
		case 4:
		case 5:
			op_run(L);
			break;
		case 6:
			op_copy(L);
			break;
		default:
			op_misc(L);
			break;
		}
	}
	return 0;
}

/* Lua allocates through malloc, so ASan tracks every string and table. */
static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	(void)ud;
	(void)osize;
	if (nsize == 0) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, nsize);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	skip_fresh_index = skip_known_bug("index-fresh-string");
	skip_stdin = skip_known_bug("stdin-after-callback");
	skip_error_table = skip_known_bug("error-not-string");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	in_p = data;
	in_n = size;
	nested_depth = 0;
	lua_State *L = lua_newstate(alloc, NULL);
	if (!L)
		abort();
	luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
	if (lua_cpcall(L, body, NULL) != 0) {
		fprintf(stderr, "fuzz_lua_core: unprotected error: %s\n", lua_tostring(L, -1));
		abort();
	}
	lua_close(L);
	return 0;
}
