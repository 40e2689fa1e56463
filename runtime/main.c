/* The llmbox CLI: a tiny C main that embeds LuaJIT, makes llmbox.core available, and hands the
 * arguments to lua/llmbox/cli.lua, where all the command-line logic lives. */
#define _GNU_SOURCE
#include "llmbox.h"

#include <lauxlib.h>
#include <luajit.h>
#include <limits.h>
#include <stdbool.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int luaopen_llmbox_core(lua_State *L);

/* The trees of llmbox's Lua modules next to the binary, each with where make put its bytecode:
 * the build tree (lua/, compiled into build/lua/) and an install (PREFIX/share/lua/5.1, compiled
 * into PREFIX/lib/lua/5.1/llmbox/bc/). Relative to the binary's directory. */
static const char *const lua_trees[][2] = {{"/../../lua", "/../lua"},
					   {"/../share/lua/5.1", "/../lib/lua/5.1/llmbox/bc"}};

static bool not_older(const struct stat *a, const struct stat *b)
{
	return a->st_mtim.tv_sec > b->st_mtim.tv_sec ||
	       (a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec >= b->st_mtim.tv_nsec);
}

/* A searcher ahead of Lua's own: one of llmbox's modules loads from its bytecode (`luajit -bg`,
 * with debug info) when that is not older than its source, which is what `llmbox run` spends
 * starting up (parsing the sources: ~5 ms; loading bytecode: ~1.4 ms). A source edited since
 * the build is newer, so Lua's own searcher loads it: a stale build never runs old code. The
 * binary's directory is the closure's upvalue. */
static int bytecode_searcher(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	const char *dir = lua_tostring(L, lua_upvalueindex(1));
	char rel[256];
	if (strncmp(name, "llmbox", 6) != 0 || (name[6] != '\0' && name[6] != '.') ||
	    strlen(name) >= sizeof rel) {
		lua_pushliteral(L, "");
		return 1;
	}
	for (size_t i = 0; name[i] != '\0' && (rel[i] = name[i] == '.' ? '/' : name[i]); i++)
		rel[i + 1] = '\0';
	static const char *const tails[] = {".lua", "/init.lua"};
	for (size_t t = 0; t < sizeof lua_trees / sizeof *lua_trees; t++) {
		for (size_t k = 0; k < 2; k++) {
			char src[PATH_MAX], bc[PATH_MAX];
			struct stat ss, bs;
			snprintf(src, sizeof src, "%s%s/%s%s", dir, lua_trees[t][0], rel, tails[k]);
			if (stat(src, &ss) != 0)
				continue;
			snprintf(bc, sizeof bc, "%s%s/%s%s", dir, lua_trees[t][1], rel, tails[k]);
			if (stat(bc, &bs) != 0 || !not_older(&bs, &ss) ||
			    luaL_loadfile(L, bc) != 0) {
				lua_pushliteral(L, ""); /* Lua's own searcher finds the source */
				return 1;
			}
			/* Modules find their files (recipes, hooks, policies) from their own chunk
			 * name: the bytecode must name this source (make compiles it with -F), else
			 * (a tree moved, or run from a DESTDIR) the source is loaded. */
			lua_Debug ar;
			char real[PATH_MAX];
			lua_pushvalue(L, -1);
			lua_getinfo(L, ">S", &ar);
			if (!realpath(src, real) || ar.source[0] != '@' ||
			    strcmp(ar.source + 1, real) != 0) {
				lua_pop(L, 1);
				lua_pushliteral(L, "");
			}
			return 1;
		}
	}
	lua_pushliteral(L, "");
	return 1;
}

/* Finds the Lua tree next to the binary: the build tree (build/bin/llmbox -> lua/) or an install
 * (PREFIX/bin/llmbox -> PREFIX/share/lua/5.1), so a build runs from anywhere without setup; the
 * same for the C modules that are not linked in.
 * LLMBOX_LUA_DIR overrides both. */
static void set_paths(lua_State *L)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n < 0)
		n = 0;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	const char *env = getenv("LLMBOX_LUA_DIR");
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "path");
	const char *old = lua_tostring(L, -1);
	if (env && *env)
		lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", env, env, old);
	else
		lua_pushfstring(L,
				"%s/../../lua/?.lua;%s/../../lua/?/init.lua;"
				"%s/../share/lua/5.1/?.lua;%s/../share/lua/5.1/?/init.lua;%s",
				exe, exe, exe, exe, old);
	lua_setfield(L, -3, "path");
	lua_pop(L, 1);
	/* The modules beside llmbox.core (llmbox.http_core) are loaded when first required, from
	 * the build tree (build/lib) or an install (PREFIX/lib/lua/5.1). */
	lua_getfield(L, -1, "cpath");
	lua_pushfstring(L, "%s/../lib/?.so;%s/../lib/lua/5.1/?.so;%s", exe, exe,
			lua_tostring(L, -1));
	lua_setfield(L, -3, "cpath");
	lua_pop(L, 1);
	/* llmbox's bytecode: searched second, after package.preload (not with LLMBOX_LUA_DIR) */
	if (!(env && *env)) {
		lua_getfield(L, -1, "loaders");
		for (int i = (int)lua_objlen(L, -1); i >= 2; i--) {
			lua_rawgeti(L, -1, i);
			lua_rawseti(L, -2, i + 1);
		}
		lua_pushstring(L, exe);
		lua_pushcclosure(L, bytecode_searcher, 1);
		lua_rawseti(L, -2, 2);
		lua_pop(L, 1);
	}
	/* llmbox.core is linked into this binary: preload it. */
	lua_getfield(L, -1, "preload");
	lua_pushcfunction(L, luaopen_llmbox_core);
	lua_setfield(L, -2, "llmbox.core");
	lua_pop(L, 2);
}

/* Commands that start, do one thing and exit run most of their Lua once: compiling traces costs
 * them more than it saves (measured on `run`: the policy's load 6.1 -> 3.5 ms, the recipes'
 * 1.1 -> 0.4 ms). The long-lived ones (serve, mcp, its workers, repl, script) keep the JIT. */
static bool one_shot_command(const char *cmd)
{
	static const char *const one_shot[] = {"run",	    "exec",	"check",  "langs",
					       "policies",  "backends", "doctor", "tools",
					       "--version", "version",	"help",	  "--help"};
	for (size_t i = 0; cmd && i < sizeof one_shot / sizeof *one_shot; i++)
		if (strcmp(cmd, one_shot[i]) == 0)
			return true;
	return false;
}

static int traceback(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	luaL_traceback(L, L, msg ? msg : "(error object is not a string)", 1);
	return 1;
}

/* Every open session holds a few file descriptors (see runtime/fds.c): the CLI and what it starts
 * (mcp, its workers, scripts) may have as many as the hard limit allows. Only here, in a process
 * of our own: the library never changes the limits of a process it is loaded into. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	/* for `llmbox run --timings`: when main() began, on the clock llmbox.util.now_ms reads */
	struct timespec started;
	clock_gettime(CLOCK_MONOTONIC, &started);
	raise_fd_limit();
	lua_State *L = luaL_newstate();
	if (!L) {
		fputs("llmbox: cannot create the Lua state (out of memory)\n", stderr);
		return 125;
	}
	luaL_openlibs(L);
	bool one_shot = argc > 1 && one_shot_command(argv[1]);
	if (one_shot)
		luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
	set_paths(L);
	lua_pushcfunction(L, traceback);
	lua_getglobal(L, "require");
	lua_pushstring(L, "llmbox.cli");
	if (lua_pcall(L, 1, 1, 1) != 0) {
		fprintf(stderr, "llmbox: cannot load the Lua library: %s\n", lua_tostring(L, -1));
		lua_close(L);
		return 125;
	}
	lua_getfield(L, -1, "main");
	lua_createtable(L, argc, 1);
	for (int i = 0; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_rawseti(L, -2, i);
	}
	lua_pushnumber(L, (double)started.tv_sec * 1e3 + (double)started.tv_nsec / 1e6);
	lua_setfield(L, -2, "started_ms");
	int rc = 125;
	bool failed = lua_pcall(L, 1, 1, 1) != 0;
	if (failed) {
		fprintf(stderr, "llmbox: internal error: %s\n", lua_tostring(L, -1));
	} else if (lua_isnumber(L, -1)) {
		rc = (int)lua_tointeger(L, -1);
	} else {
		rc = 0;
	}
	fflush(stdout);
	/* A one-shot command that came back has closed its sessions and collected its runs: freeing
	 * the Lua state would only give memory back (~0.9 ms of `llmbox run`). Its children are
	 * still reaped, and exit() flushes the files Lua left open. */
	if (one_shot && !failed) {
		lb_reap(true);
		return rc;
	}
	lua_close(L);
	return rc;
}
