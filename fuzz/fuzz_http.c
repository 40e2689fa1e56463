/* Fuzz target "http": the request parser of `llmbox serve` (runtime/lua_httpparse.c, its binding
 * of Debian's http-parser) in a real LuaJIT state, fed the way the daemon feeds it.
 *
 * The first byte picks the head limit, the second the size of the pieces the rest arrives in;
 * each piece is fed, and what a call leaves unused (the bytes after a request's end) is fed
 * again, as llmbox.serve.http does once it has answered. What must hold: no sanitizer report;
 * every call returns events and a count of used bytes no larger than what it was given, or nil,
 * a message and 400 or 431 (and then nothing more is fed); every event is "head" (method, url,
 * headers table of strings, keep-alive boolean), "body" (a string) or "end". */
#define _GNU_SOURCE
#include "../runtime/internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

static void check_events(lua_State *L, int idx)
{
	int n = (int)lua_objlen(L, idx);
	for (int i = 1; i <= n; i++) {
		lua_rawgeti(L, idx, i);
		if (!lua_istable(L, -1))
			abort();
		lua_rawgeti(L, -1, 1);
		const char *kind = lua_tostring(L, -1);
		if (!kind)
			abort();
		if (!strcmp(kind, "head")) {
			lua_rawgeti(L, -2, 2);
			lua_rawgeti(L, -3, 3);
			lua_rawgeti(L, -4, 4);
			lua_rawgeti(L, -5, 5);
			if (lua_type(L, -4) != LUA_TSTRING || lua_type(L, -3) != LUA_TSTRING ||
			    !lua_istable(L, -2) || lua_type(L, -1) != LUA_TBOOLEAN)
				abort();
			lua_pushnil(L);
			while (lua_next(L, -3)) {
				if (lua_type(L, -2) != LUA_TSTRING ||
				    lua_type(L, -1) != LUA_TSTRING)
					abort();
				lua_pop(L, 1);
			}
			lua_pop(L, 4);
		} else if (!strcmp(kind, "body")) {
			lua_rawgeti(L, -2, 2);
			if (lua_type(L, -1) != LUA_TSTRING)
				abort();
			lua_pop(L, 1);
		} else if (strcmp(kind, "end") != 0) {
			abort();
		}
		lua_pop(L, 2);
	}
}

/* parser:feed(data, len) -> the count of bytes used, or -1 after an error */
static long feed(lua_State *L, int parser, const uint8_t *data, size_t len)
{
	lua_getfield(L, parser, "feed");
	lua_pushvalue(L, parser);
	lua_pushlstring(L, (const char *)data, len);
	if (lua_pcall(L, 2, 3, 0) != 0)
		abort(); /* feed() raises only when called after an error, which this never does */
	if (lua_isnil(L, -3)) {
		lua_Integer status = lua_tointeger(L, -1);
		if (lua_type(L, -2) != LUA_TSTRING || (status != 400 && status != 431))
			abort();
		lua_pop(L, 3);
		return -1;
	}
	if (!lua_istable(L, -3) || !lua_isnumber(L, -2))
		abort();
	lua_Integer used = lua_tointeger(L, -2);
	if (used < 0 || (size_t)used > len)
		abort();
	check_events(L, lua_gettop(L) - 2);
	lua_pop(L, 3);
	return (long)used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	double max_head = 256 + (double)data[0] * 64;
	size_t piece = (size_t)data[1] % 97 + 1;
	data += 2;
	size -= 2;
	lua_State *L = luaL_newstate();
	if (!L)
		abort();
	lua_pushcfunction(L, lb_lua_http_request_parser);
	lua_createtable(L, 0, 1);
	lua_pushnumber(L, max_head);
	lua_setfield(L, -2, "max_head");
	if (lua_pcall(L, 1, 1, 0) != 0)
		abort();
	int parser = lua_gettop(L);
	size_t off = 0;
	while (off < size) {
		size_t n = size - off < piece ? size - off : piece;
		long used = feed(L, parser, data + off, n);
		if (used < 0)
			break;
		off += (size_t)used;
		/* nothing taken from a non-empty piece: only a request's end pauses the parser, and
		 * that takes at least one byte */
		if (used == 0 && n > 0) {
			used = feed(L, parser, data + off, n);
			if (used < 0)
				break;
			if (used == 0)
				abort();
			off += (size_t)used;
		}
	}
	lua_close(L);
	return 0;
}
