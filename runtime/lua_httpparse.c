/* HTTP/1.1 requests parsed for `llmbox serve` by Node's http-parser (Debian's libhttp-parser):
 * a small, incremental C parser with no event loop of its own, so the daemon's libuv loop (luv)
 * owns the sockets and hands the bytes over as they come. No HTTP is parsed by hand.
 *
 *   local p = core.http_request_parser{ max_head = 65536 }
 *   local events, used = p:feed(data)  |  nil, err, status
 *       events: { { "head", method, url, headers, keep_alive }, { "body", data }, ..., { "end" } }
 *       used: the bytes of data taken; parsing stops after a request's end, and what follows it
 *       (a pipelined request) is the caller's to feed again once it has answered
 *       headers: names lowercased; a repeated name's values joined by ", " (RFC 9110 5.3)
 *       err, status: the request is malformed (400) or its head too large (431); the parser
 *       takes no more input after an error
 *
 * core.http_response_parser() parses a server's answer the same way (`llmbox run --server`, whose
 * daemon answers on a unix socket or TCP): its head event is { "head", status, "", headers,
 * keep_alive }, and feed("") says the connection ended (a body that runs to the end of the
 * connection then ends).
 *
 * Ownership: the parser is a userdata the Lua side owns; feed() copies what it returns. */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <http_parser.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#define PARSER_MT "llmbox.core.http_request_parser"

typedef struct {
	http_parser p;
	lua_State *L; /* during feed() only */
	int events;   /* stack index of the events table, during feed() */
	size_t n_events;
	size_t max_head;
	size_t head_len; /* bytes of url and headers so far, for max_head */
	int headers;	 /* registry ref of the current head's headers table, or LUA_NOREF */
	char *url, *field, *value;
	size_t url_len, field_len, value_len;
	int in_value; /* the last callback was on_header_value */
	int too_large;
	int failed;
	int upgraded; /* the request asked to leave HTTP/1.1 (Upgrade, CONNECT): nothing after it is
			 parsed */
} lparser;

static void clear_buf(char **b, size_t *len)
{
	free(*b);
	*b = NULL;
	*len = 0;
}

static int append(lparser *lp, char **b, size_t *len, const char *at, size_t n)
{
	lp->head_len += n;
	if (lp->head_len > lp->max_head) {
		lp->too_large = 1;
		return -1;
	}
	char *nb = realloc(*b, *len + n + 1);
	if (!nb)
		return -1;
	memcpy(nb + *len, at, n);
	*len += n;
	nb[*len] = '\0';
	*b = nb;
	return 0;
}

/* One header (field: value) into the current head's table. */
static int flush_header(lparser *lp)
{
	if (!lp->field)
		return 0;
	lua_State *L = lp->L;
	for (size_t i = 0; i < lp->field_len; i++)
		lp->field[i] = (char)tolower((unsigned char)lp->field[i]);
	lua_rawgeti(L, LUA_REGISTRYINDEX, lp->headers);
	lua_pushlstring(L, lp->field, lp->field_len);
	lua_rawget(L, -2);
	if (lua_isstring(L, -1)) {
		lua_pushliteral(L, ", ");
		lua_pushlstring(L, lp->value ? lp->value : "", lp->value_len);
		lua_concat(L, 3);
	} else {
		lua_pop(L, 1);
		lua_pushlstring(L, lp->value ? lp->value : "", lp->value_len);
	}
	lua_pushlstring(L, lp->field, lp->field_len);
	lua_insert(L, -2);
	lua_rawset(L, -3);
	lua_pop(L, 1);
	clear_buf(&lp->field, &lp->field_len);
	clear_buf(&lp->value, &lp->value_len);
	lp->in_value = 0;
	return 0;
}

static int on_message_begin(http_parser *p)
{
	lparser *lp = (lparser *)p;
	lp->head_len = 0;
	clear_buf(&lp->url, &lp->url_len);
	clear_buf(&lp->field, &lp->field_len);
	clear_buf(&lp->value, &lp->value_len);
	lp->in_value = 0;
	lua_newtable(lp->L);
	luaL_unref(lp->L, LUA_REGISTRYINDEX, lp->headers);
	lp->headers = luaL_ref(lp->L, LUA_REGISTRYINDEX);
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	lparser *lp = (lparser *)p;
	return append(lp, &lp->url, &lp->url_len, at, n);
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	lparser *lp = (lparser *)p;
	if (lp->in_value)
		flush_header(lp);
	return append(lp, &lp->field, &lp->field_len, at, n);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	lparser *lp = (lparser *)p;
	lp->in_value = 1;
	return append(lp, &lp->value, &lp->value_len, at, n);
}

static int on_headers_complete(http_parser *p)
{
	lparser *lp = (lparser *)p;
	lua_State *L = lp->L;
	flush_header(lp);
	lua_createtable(L, 5, 0);
	lua_pushliteral(L, "head");
	lua_rawseti(L, -2, 1);
	if (p->type == HTTP_RESPONSE)
		lua_pushinteger(L, (lua_Integer)p->status_code);
	else
		lua_pushstring(L, http_method_str((enum http_method)p->method));
	lua_rawseti(L, -2, 2);
	lua_pushlstring(L, lp->url ? lp->url : "", lp->url_len);
	lua_rawseti(L, -2, 3);
	lua_rawgeti(L, LUA_REGISTRYINDEX, lp->headers);
	lua_rawseti(L, -2, 4);
	lua_pushboolean(L, http_should_keep_alive(p));
	lua_rawseti(L, -2, 5);
	lua_rawseti(L, lp->events, (int)++lp->n_events);
	clear_buf(&lp->url, &lp->url_len);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	lparser *lp = (lparser *)p;
	lua_State *L = lp->L;
	lua_createtable(L, 2, 0);
	lua_pushliteral(L, "body");
	lua_rawseti(L, -2, 1);
	lua_pushlstring(L, at, n);
	lua_rawseti(L, -2, 2);
	lua_rawseti(L, lp->events, (int)++lp->n_events);
	return 0;
}

static int on_message_complete(http_parser *p)
{
	lparser *lp = (lparser *)p;
	lua_State *L = lp->L;
	lua_createtable(L, 1, 0);
	lua_pushliteral(L, "end");
	lua_rawseti(L, -2, 1);
	lua_rawseti(L, lp->events, (int)++lp->n_events);
	/* one request at a time: what follows it (pipelined) waits for the next feed() */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings SETTINGS = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* parser:feed(data) -> events, used | nil, err, status */
static int l_feed(lua_State *L)
{
	lparser *lp = luaL_checkudata(L, 1, PARSER_MT);
	size_t len;
	const char *data = luaL_checklstring(L, 2, &len);
	if (lp->failed)
		return luaL_error(L, "http_request_parser: feed() after an error");
	if (lp->upgraded) {
		lp->failed = 1;
		lua_pushnil(L);
		lua_pushliteral(L, "the connection asked to leave HTTP/1.1 (Upgrade or CONNECT), "
				   "which this server "
				   "does not do: nothing after that request is read");
		lua_pushinteger(L, 400);
		return 3;
	}
	lua_settop(L, 2);
	lua_newtable(L);
	lp->L = L;
	lp->events = 3;
	lp->n_events = 0;
	http_parser_pause(&lp->p, 0);
	size_t done = http_parser_execute(&lp->p, &SETTINGS, data, len);
	lp->L = NULL;
	enum http_errno e = HTTP_PARSER_ERRNO(&lp->p);
	if (e == HPE_PAUSED) {
		/* a request ended: the bytes after it are the caller's to feed again */
		lua_pushinteger(L, (lua_Integer)done);
		return 2;
	}
	if (lp->too_large) {
		lp->failed = 1;
		lua_pushnil(L);
		lua_pushfstring(L, "the request's head is larger than %d bytes", (int)lp->max_head);
		lua_pushinteger(L, 431);
		return 3;
	}
	if (e == HPE_OK && lp->p.upgrade) {
		/* the request itself is answered as any other; what follows is not HTTP/1.1 */
		lp->upgraded = 1;
		lua_pushinteger(L, (lua_Integer)len);
		return 2;
	}
	if (e != HPE_OK || done != len) {
		lp->failed = 1;
		lua_pushnil(L);
		lua_pushfstring(L, "malformed %s: %s",
				lp->p.type == HTTP_RESPONSE ? "response" : "request",
				http_errno_description(e));
		lua_pushinteger(L, 400);
		return 3;
	}
	lua_pushinteger(L, (lua_Integer)done);
	return 2;
}

static int l_gc(lua_State *L)
{
	lparser *lp = luaL_checkudata(L, 1, PARSER_MT);
	clear_buf(&lp->url, &lp->url_len);
	clear_buf(&lp->field, &lp->field_len);
	clear_buf(&lp->value, &lp->value_len);
	luaL_unref(L, LUA_REGISTRYINDEX, lp->headers);
	lp->headers = LUA_NOREF;
	return 0;
}

static int new_parser(lua_State *L, enum http_parser_type type)
{
	double max_head = 65536;
	if (lua_istable(L, 1)) {
		lua_getfield(L, 1, "max_head");
		max_head = luaL_optnumber(L, -1, max_head);
		lua_pop(L, 1);
	}
	if (!(max_head >= 256 && max_head <= 16777216))
		return luaL_argerror(L, 1, "max_head: expected 256 bytes to 16 MiB");
	lparser *lp = lua_newuserdata(L, sizeof *lp);
	memset(lp, 0, sizeof *lp);
	lp->headers = LUA_NOREF;
	lp->max_head = (size_t)max_head;
	http_parser_init(&lp->p, type);
	if (luaL_newmetatable(L, PARSER_MT)) {
		lua_pushcfunction(L, l_gc);
		lua_setfield(L, -2, "__gc");
		lua_newtable(L);
		lua_pushcfunction(L, l_feed);
		lua_setfield(L, -2, "feed");
		lua_setfield(L, -2, "__index");
	}
	lua_setmetatable(L, -2);
	return 1;
}

/* core.http_request_parser([{ max_head = bytes }]) -> parser */
int lb_lua_http_request_parser(lua_State *L)
{
	return new_parser(L, HTTP_REQUEST);
}

/* core.http_response_parser([{ max_head = bytes }]) -> parser */
int lb_lua_http_response_parser(lua_State *L)
{
	return new_parser(L, HTTP_RESPONSE);
}
