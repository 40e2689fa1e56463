/* The llmbox CLI: a tiny C main that embeds LuaJIT, makes llmbox.core available, and hands the
 * arguments to lua/llmbox/cli.lua, where all the command-line logic lives. */
#define _GNU_SOURCE
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int luaopen_llmbox_core(lua_State *L);

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
	/* llmbox.core is linked into this binary: preload it. */
	lua_getfield(L, -1, "preload");
	lua_pushcfunction(L, luaopen_llmbox_core);
	lua_setfield(L, -2, "llmbox.core");
	lua_pop(L, 2);
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
	raise_fd_limit();
	lua_State *L = luaL_newstate();
	if (!L) {
		fputs("llmbox: cannot create the Lua state (out of memory)\n", stderr);
		return 125;
	}
	luaL_openlibs(L);
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
	int rc = 125;
	if (lua_pcall(L, 1, 1, 1) != 0) {
		fprintf(stderr, "llmbox: internal error: %s\n", lua_tostring(L, -1));
	} else if (lua_isnumber(L, -1)) {
		rc = (int)lua_tointeger(L, -1);
	} else {
		rc = 0;
	}
	fflush(stdout);
	lua_close(L);
	return rc;
}
