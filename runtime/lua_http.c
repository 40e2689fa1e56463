/* The Lua binding of http.c, module llmbox.http_core: the engine drivers' HTTP, driven by the
 * caller's loop. llmbox.http builds the blocking calls on top. A module of its own, apart from
 * llmbox.core: libcurl and what it links take ~14 ms to load, which every `llmbox run` would pay.
 *
 *   http_core.new()                    -> client (one libcurl multi handle)
 *   client:request{ url, method, unix_socket, headers = { "Name: value", ... }, body,
 *                   ca_file, cert_file, key_file, ca_pem, cert_pem, key_pem (the same as PEM
 *                   in memory), timeout_ms, connect_timeout_ms, max_body }
 *                                      -> request | nil, err, errno_name
 *   client:fds()                       -> { fd, ... }, { "r" | "w" | "rw", ... }, timeout_ms | nil
 *   client:step([wait_ms])             -> requests still running; wait_ms: 0 (default) never
 *                                         blocks, -1 sleeps until something is due
 *   client:close()                     (requests still open keep it alive until they end)
 *   request:done()                     -> true when the transfer is over (see result)
 *   request:take()                     -> the body bytes since the last take | nil
 *   request:result()                   -> { status, headers = { [lower-case name] = value },
 *                                           body = what was not taken } | nil, err, errno_name
 *   request:discard()                  (garbage collection does the same)
 * A request with connect_only = true only connects; once done it is a raw stream (an engine's
 * "Upgrade: tcp" exec carries stdin this way):
 *   stream:fd()                        -> the socket to watch | nil
 *   stream:send(data [, from])         -> bytes sent [, "again"] | nil, err, errno_name (from:
 *                                         the 1-based position of data to send from)
 *   stream:recv([max])                 -> data | "", "again" | "", "eof" | nil, err, errno_name
 *   stream:shutdown_write()            -> true | nil, err (the peer reads EOF; not over TLS)
 *   stream:wait("r" | "w" | "rw", ms)  -> ready (for blocking callers)
 */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <poll.h>
#include <string.h>

#define CLIENT_MT  "llmbox.core.http"
#define REQUEST_MT "llmbox.core.http_request"

typedef struct lclient {
	lb_http *h;
} lclient;

typedef struct lrequest {
	lb_http_req *r;
} lrequest;

static lclient *check_client(lua_State *L)
{
	lclient *c = luaL_checkudata(L, 1, CLIENT_MT);
	if (!c->h)
		luaL_error(L, "the HTTP client is closed");
	return c;
}

static lrequest *check_request(lua_State *L)
{
	lrequest *q = luaL_checkudata(L, 1, REQUEST_MT);
	if (!q->r)
		luaL_error(L, "the request has ended");
	return q;
}

static int l_http(lua_State *L)
{
	lclient *c = lua_newuserdata(L, sizeof *c);
	c->h = NULL;
	luaL_getmetatable(L, CLIENT_MT);
	lua_setmetatable(L, -2);
	lb_error err = {0};
	if (!(c->h = lb_http_new(&err)))
		return lb_lua_push_error(L, &err);
	return 1;
}

/* Fields are read with rawget, as in lua_core.c: an __index function could hand C a fresh
 * string that nothing keeps alive. */
static void rawfield(lua_State *L, int t, const char *key)
{
	lua_pushstring(L, key);
	lua_rawget(L, t);
}

static const char *field_string(lua_State *L, int t, const char *key, size_t *len)
{
	rawfield(L, t, key);
	const char *v = NULL;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "%s: expected a string, got %s", key, luaL_typename(L, -1));
		v = lua_tolstring(L, -1, len);
	}
	lua_pop(L, 1); /* the table keeps the string alive */
	return v;
}

static long field_ms(lua_State *L, int t, const char *key)
{
	rawfield(L, t, key);
	double v = lua_isnil(L, -1) ? 0 : lua_tonumber(L, -1);
	if (!lua_isnil(L, -1) && (!lua_isnumber(L, -1) || !(v >= 0 && v <= 86400000)))
		luaL_error(L, "%s: expected milliseconds (0 to 86400000)", key);
	lua_pop(L, 1);
	return (long)v;
}

/* client:request{...} */
static int l_request(lua_State *L)
{
	lclient *c = check_client(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	lb_http_request rq = {0};
	rq.url = field_string(L, 2, "url", NULL);
	if (!rq.url)
		return luaL_argerror(L, 2, "url is required");
	rq.method = field_string(L, 2, "method", NULL);
	rq.unix_socket = field_string(L, 2, "unix_socket", NULL);
	rq.body = field_string(L, 2, "body", &rq.body_len);
	rq.ca_file = field_string(L, 2, "ca_file", NULL);
	rq.cert_file = field_string(L, 2, "cert_file", NULL);
	rq.key_file = field_string(L, 2, "key_file", NULL);
	rq.ca_pem = field_string(L, 2, "ca_pem", &rq.ca_pem_len);
	rq.cert_pem = field_string(L, 2, "cert_pem", &rq.cert_pem_len);
	rq.key_pem = field_string(L, 2, "key_pem", &rq.key_pem_len);
	rq.timeout_ms = field_ms(L, 2, "timeout_ms");
	rq.connect_timeout_ms = field_ms(L, 2, "connect_timeout_ms");
	rawfield(L, 2, "max_body");
	double max = lua_isnil(L, -1) ? 0 : lua_tonumber(L, -1);
	if (!(max >= 0 && max <= 9007199254740992.0))
		return luaL_argerror(L, 2, "max_body: expected a byte count (0 for no limit)");
	rq.max_body = (uint64_t)max;
	lua_pop(L, 1);
	rawfield(L, 2, "connect_only");
	rq.connect_only = lua_toboolean(L, -1);
	lua_pop(L, 1);
	rawfield(L, 2, "headers");
	size_t n = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
	if (!lua_isnil(L, -1) && !lua_istable(L, -1))
		return luaL_argerror(L, 2, "headers: expected an array of \"Name: value\" strings");
	const char **hv = lua_newuserdata(L, (n + 1) * sizeof *hv); /* freed by the GC */
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, -2, (int)i + 1);
		size_t len;
		hv[i] = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
		if (!hv[i] || strlen(hv[i]) != len || strpbrk(hv[i], "\r\n") || !strchr(hv[i], ':'))
			return luaL_error(L, "headers[%d]: expected one \"Name: value\" line",
					  (int)i + 1);
		lua_pop(L, 1); /* the headers table keeps it alive */
	}
	hv[n] = NULL;
	rq.headers = hv;
	lrequest *q = lua_newuserdata(L, sizeof *q);
	q->r = NULL;
	luaL_getmetatable(L, REQUEST_MT);
	lua_setmetatable(L, -2);
	lb_error err = {0};
	if (!(q->r = lb_http_begin(c->h, &rq, &err)))
		return lb_lua_push_error(L, &err);
	return 1;
}

static int l_client_fds(lua_State *L)
{
	lclient *c = check_client(L);
	struct pollfd pf[64];
	int timeout;
	int n = lb_http_fds(c->h, pf, 64, &timeout);
	return lb_lua_push_fds(L, pf, n, timeout);
}

static int l_client_step(lua_State *L)
{
	lclient *c = check_client(L);
	double ms = luaL_optnumber(L, 2, 0);
	if (!(ms >= -1 && ms <= 86400000))
		return luaL_argerror(L, 2, "expected milliseconds (-1 to 86400000)");
	int running = lb_http_step(c->h, (int)ms);
	if (running < 0)
		return luaL_error(L, "polling the HTTP client's sockets: %s", strerror(errno));
	lua_pushinteger(L, running);
	return 1;
}

static int l_client_close(lua_State *L)
{
	lclient *c = luaL_checkudata(L, 1, CLIENT_MT);
	lb_http_free(c->h);
	c->h = NULL;
	return 0;
}

static int l_request_done(lua_State *L)
{
	lrequest *q = luaL_checkudata(L, 1, REQUEST_MT);
	lua_pushboolean(L, !q->r || lb_http_done(q->r));
	return 1;
}

static int l_request_take(lua_State *L)
{
	lrequest *q = check_request(L);
	size_t len;
	const char *body = lb_http_body(q->r, &len);
	if (!len) {
		lua_pushnil(L);
		return 1;
	}
	lua_pushlstring(L, body, len);
	lb_http_consume(q->r, len);
	return 1;
}

/* "Name: value" lines after the status line, as a table keyed by lower-case names; a repeated
 * name keeps its values joined with ", " (RFC 9110's list form). */
static void push_headers(lua_State *L, const char *head, size_t len)
{
	lua_newtable(L);
	const char *p = head, *end = head + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		if (colon && strncmp(p, "HTTP/", 5) != 0) {
			luaL_Buffer name;
			luaL_buffinit(L, &name);
			for (const char *k = p; k < colon; k++)
				luaL_addchar(&name, (char)tolower((unsigned char)*k));
			luaL_pushresult(&name);
			const char *v = colon + 1, *ve = eol;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			lua_pushvalue(L, -1);
			lua_rawget(L, -3);
			if (lua_isnil(L, -1)) {
				lua_pop(L, 1);
				lua_pushlstring(L, v, (size_t)(ve - v));
			} else {
				lua_pushliteral(L, ", ");
				lua_pushlstring(L, v, (size_t)(ve - v));
				lua_concat(L, 3);
			}
			lua_rawset(L, -3);
		}
		p = eol + 1;
	}
}

static int l_request_result(lua_State *L)
{
	lrequest *q = check_request(L);
	size_t len;
	const char *body = lb_http_body(q->r, &len);
	lua_createtable(L, 0, 3);
	lua_pushlstring(L, body, len);
	lua_setfield(L, -2, "body");
	lb_http_response res;
	lb_error err = {0};
	int rc = lb_http_end(q->r, &res, &err);
	q->r = NULL;
	if (rc < 0)
		return lb_lua_push_error(L, &err);
	lua_pushinteger(L, res.status);
	lua_setfield(L, -2, "status");
	push_headers(L, res.headers ? res.headers : "", res.headers_len);
	free(res.headers);
	lua_setfield(L, -2, "headers");
	return 1;
}

/* ---- raw streams (connect_only requests, once done) ---- */

static int l_stream_fd(lua_State *L)
{
	int fd = lb_http_fd(check_request(L)->r);
	if (fd < 0)
		lua_pushnil(L);
	else
		lua_pushinteger(L, fd);
	return 1;
}

/* stream:send(data [, from]) -> bytes sent [, "again"] | nil, err, errno_name */
static int l_stream_send(lua_State *L)
{
	lrequest *q = check_request(L);
	size_t len, sent;
	const char *data = luaL_checklstring(L, 2, &len);
	/* from a 1-based position of data: a large body is sent in place, never copied per write */
	double from = luaL_optnumber(L, 3, 1);
	if (!(from >= 1 && from <= (double)len + 1 && from == (double)(size_t)from))
		return luaL_argerror(L, 3, "expected a position in data");
	data += (size_t)from - 1;
	len -= (size_t)from - 1;
	lb_error err = {0};
	int rc = lb_http_send(q->r, data, len, &sent, &err);
	if (rc < 0)
		return lb_lua_push_error(L, &err);
	lua_pushinteger(L, (lua_Integer)sent);
	if (rc == 1) {
		lua_pushliteral(L, "again");
		return 2;
	}
	return 1;
}

/* stream:recv([max]) -> data | "", "again" | "", "eof" | nil, err, errno_name */
static int l_stream_recv(lua_State *L)
{
	lrequest *q = check_request(L);
	double max = luaL_optnumber(L, 2, 65536);
	if (!(max >= 1 && max <= 16777216))
		return luaL_argerror(L, 2, "expected a byte count (1 to 16 MiB)");
	char stack[65536];
	char *buf = max <= sizeof stack ? stack : lua_newuserdata(L, (size_t)max);
	size_t got;
	lb_error err = {0};
	int rc = lb_http_recv(q->r, buf, (size_t)max, &got, &err);
	if (rc < 0)
		return lb_lua_push_error(L, &err);
	lua_pushlstring(L, buf, got);
	if (got > 0)
		return 1;
	lua_pushstring(L, rc == 1 ? "again" : "eof");
	return 2;
}

/* stream:wait("r" | "w" | "rw", ms) -> ready (true | false): for blocking callers; an event
 * loop watches stream:fd() instead */
static int l_stream_wait(lua_State *L)
{
	int fd = lb_http_fd(check_request(L)->r);
	const char *ev = luaL_checkstring(L, 2);
	double ms = luaL_checknumber(L, 3);
	if (!(ms >= -1 && ms <= 86400000))
		return luaL_argerror(L, 3, "expected milliseconds (-1 to 86400000)");
	if (fd < 0)
		return luaL_error(L, "the stream has no connection");
	struct pollfd pf = {.fd = fd,
			    .events = (short)((strchr(ev, 'r') ? POLLIN : 0) |
					      (strchr(ev, 'w') ? POLLOUT : 0))};
	int r;
	while ((r = poll(&pf, 1, (int)ms)) < 0 && errno == EINTR)
		;
	lua_pushboolean(L, r > 0);
	return 1;
}

static int l_stream_shutdown_write(lua_State *L)
{
	lb_error err = {0};
	if (lb_http_shutdown_write(check_request(L)->r, &err) < 0)
		return lb_lua_push_error(L, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_request_discard(lua_State *L)
{
	lrequest *q = luaL_checkudata(L, 1, REQUEST_MT);
	lb_http_discard(q->r);
	q->r = NULL;
	return 0;
}

int luaopen_llmbox_http_core(lua_State *L)
{
	static const luaL_Reg client_methods[] = {{"request", l_request},
						  {"fds", l_client_fds},
						  {"step", l_client_step},
						  {"close", l_client_close},
						  {NULL, NULL}};
	static const luaL_Reg request_methods[] = {
		{"done", l_request_done},     {"take", l_request_take},
		{"result", l_request_result}, {"discard", l_request_discard},
		{"fd", l_stream_fd},	      {"send", l_stream_send},
		{"recv", l_stream_recv},      {"shutdown_write", l_stream_shutdown_write},
		{"wait", l_stream_wait},      {NULL, NULL}};
	lb_lua_class(L, CLIENT_MT, client_methods, l_client_close);
	lb_lua_class(L, REQUEST_MT, request_methods, l_request_discard);
	lua_newtable(L);
	lua_pushcfunction(L, l_http);
	lua_setfield(L, -2, "new");
	return 1;
}
