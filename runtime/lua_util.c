/* Helpers shared by the Lua modules of the C core (lua_core.c: llmbox.core; lua_http.c:
 * llmbox.http_core, a module of its own so that libcurl is loaded only by those who use it). */
#define _GNU_SOURCE
#include "internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <poll.h>
#include <string.h>

int lb_lua_push_error(lua_State *L, const lb_error *e)
{
	lua_pushnil(L);
	lua_pushstring(L, e->msg);
	if (e->code > 0)
		lua_pushstring(L, strerrorname_np(e->code) ? strerrorname_np(e->code) : "EIO");
	else
		lua_pushstring(L, "EINVAL");
	return 3;
}

/* { fd, ... }, { "r" | "w" | "rw", ... }, timeout_ms | nil */
int lb_lua_push_fds(lua_State *L, const struct pollfd *pf, int n, int timeout)
{
	lua_createtable(L, n, 0);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		lua_pushinteger(L, pf[i].fd);
		lua_rawseti(L, -3, i + 1);
		bool r = pf[i].events & POLLIN, w = pf[i].events & POLLOUT;
		lua_pushstring(L, r && w ? "rw" : w ? "w" : "r");
		lua_rawseti(L, -2, i + 1);
	}
	if (timeout >= 0)
		lua_pushinteger(L, timeout);
	else
		lua_pushnil(L);
	return 3;
}

/* Registers a userdata class: its methods as __index and its finalizer as __gc. */
void lb_lua_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc)
{
	if (luaL_newmetatable(L, name)) {
		lua_newtable(L);
		luaL_register(L, NULL, methods);
		lua_setfield(L, -2, "__index");
		lua_pushcfunction(L, gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pop(L, 1);
}
