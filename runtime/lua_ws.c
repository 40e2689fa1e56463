/* The Lua binding of ws.c, module llmbox.ws_core: the Kubernetes backend's exec and attach
 * streams (llmbox.k8s.exec builds them on top). A module of its own: only that backend loads
 * libwebsockets.
 *
 *   ws_core.open{ host, port, path, tls, protocols = "a,b", headers = "Name: value\n...",
 *                 ca_pem, cert_pem, key_pem, connect_timeout_s } -> ws | nil, err, errno_name
 *   ws:fds()        -> { fd, ... }, { "r" | "w" | "rw", ... }, timeout_ms | nil (as http_core's)
 *   ws:step([ms])   -> "connecting" | "open" | "closed" | "failed" (0: never waits, -1: until due)
 *   ws:send(data)   -> true | nil, err (queued; one binary message)
 *   ws:take()       -> the next whole message | nil
 *   ws:pending()    -> true while queued messages are not yet written
 *   ws:protocol()   -> the subprotocol the server chose | nil
 *   ws:error()      -> why it failed, the upgrade's HTTP status (0 when none)
 *   ws:close_code() -> the peer's close code | nil
 *   ws:close()      (a close frame after what is queued)
 *   ws:discard()    (drops the connection; garbage collection does the same) */
#define _GNU_SOURCE
#include "internal.h"

#include <lauxlib.h>
#include <lua.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define WS_MT "llmbox.core.ws"

typedef struct lws_ud {
	lb_ws *w;
} lws_ud;

static lb_ws *check_ws(lua_State *L)
{
	lws_ud *u = luaL_checkudata(L, 1, WS_MT);
	if (!u->w)
		luaL_error(L, "the websocket is discarded");
	return u->w;
}

static const char *opt_string(lua_State *L, int t, const char *key)
{
	lua_pushstring(L, key);
	lua_rawget(L, t);
	const char *v = NULL;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "%s: expected a string, got %s", key, luaL_typename(L, -1));
		v = lua_tostring(L, -1);
	}
	lua_pop(L, 1); /* the table keeps the string alive */
	return v;
}

static int l_open(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lb_ws_options o;
	memset(&o, 0, sizeof o);
	o.host = opt_string(L, 1, "host");
	o.path = opt_string(L, 1, "path");
	o.protocols = opt_string(L, 1, "protocols");
	o.headers = opt_string(L, 1, "headers");
	o.ca_pem = opt_string(L, 1, "ca_pem");
	o.cert_pem = opt_string(L, 1, "cert_pem");
	o.key_pem = opt_string(L, 1, "key_pem");
	lua_getfield(L, 1, "port");
	o.port = (int)lua_tointeger(L, -1);
	lua_getfield(L, 1, "tls");
	o.tls = lua_toboolean(L, -1);
	lua_getfield(L, 1, "connect_timeout_s");
	o.connect_timeout_s = (int)lua_tointeger(L, -1);
	lua_pop(L, 3);
	if (!o.host || !o.path || o.port <= 0 || o.port > 65535)
		return luaL_error(L, "ws_core.open: host, path and port (1-65535) are required");
	if ((o.cert_pem == NULL) != (o.key_pem == NULL))
		return luaL_error(L,
				  "ws_core.open: a client certificate needs its key, and a key its "
				  "certificate");
	lws_ud *u = lua_newuserdata(L, sizeof *u);
	u->w = NULL;
	luaL_getmetatable(L, WS_MT);
	lua_setmetatable(L, -2);
	lb_error err = {0};
	if (!(u->w = lb_ws_open(&o, &err)))
		return lb_lua_push_error(L, &err);
	return 1;
}

static const char *const STATES[] = {"connecting", "open", "closed", "failed"};

static int l_fds(lua_State *L)
{
	lb_ws *w = check_ws(L);
	struct pollfd pf[1];
	int timeout;
	int n = lb_ws_fds(w, pf, 1, &timeout);
	return lb_lua_push_fds(L, pf, n, timeout);
}

static int l_step(lua_State *L)
{
	lb_ws *w = check_ws(L);
	double ms = luaL_optnumber(L, 2, 0);
	if (!(ms >= -1 && ms <= 86400000))
		return luaL_argerror(L, 2, "expected milliseconds (-1 to 86400000)");
	lua_pushstring(L, STATES[lb_ws_step(w, (int)ms)]);
	return 1;
}

static int l_send(lua_State *L)
{
	lb_ws *w = check_ws(L);
	size_t len;
	const char *data = luaL_checklstring(L, 2, &len);
	lb_error err = {0};
	if (lb_ws_send(w, data, len, &err) != 0)
		return lb_lua_push_error(L, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_take(lua_State *L)
{
	lb_ws *w = check_ws(L);
	unsigned char *data;
	size_t len;
	if (!lb_ws_take(w, &data, &len))
		return 0;
	lua_pushlstring(L, (const char *)data, len);
	free(data);
	return 1;
}

static int l_pending(lua_State *L)
{
	lua_pushboolean(L, lb_ws_pending(check_ws(L)));
	return 1;
}

static int l_protocol(lua_State *L)
{
	const char *p = lb_ws_protocol(check_ws(L));
	if (!*p)
		return 0;
	lua_pushstring(L, p);
	return 1;
}

static int l_error(lua_State *L)
{
	lb_ws *w = check_ws(L);
	lua_pushstring(L, lb_ws_error(w));
	lua_pushinteger(L, lb_ws_status(w));
	return 2;
}

static int l_close_code(lua_State *L)
{
	int code = lb_ws_close_code(check_ws(L));
	if (!code)
		return 0;
	lua_pushinteger(L, code);
	return 1;
}

static int l_close(lua_State *L)
{
	lb_ws_close(check_ws(L));
	return 0;
}

static int l_discard(lua_State *L)
{
	lws_ud *u = luaL_checkudata(L, 1, WS_MT);
	lb_ws_free(u->w);
	u->w = NULL;
	return 0;
}

int luaopen_llmbox_ws_core(lua_State *L)
{
	static const luaL_Reg methods[] = {{"fds", l_fds},
					   {"step", l_step},
					   {"send", l_send},
					   {"take", l_take},
					   {"pending", l_pending},
					   {"protocol", l_protocol},
					   {"error", l_error},
					   {"close", l_close},
					   {"close_code", l_close_code},
					   {"discard", l_discard},
					   {NULL, NULL}};
	lb_lua_class(L, WS_MT, methods, l_discard);
	lua_newtable(L);
	lua_pushcfunction(L, l_open);
	lua_setfield(L, -2, "open");
	return 1;
}
