/* A websocket client (libwebsockets) that never blocks its caller: the Kubernetes backend's
 * exec and attach streams (the channel protocols), which libcurl here cannot carry. One client
 * is one connection with a libwebsockets context of its own, so its TLS settings (the cluster's
 * CA, a client certificate) are that connection's alone. The caller's loop watches lb_ws_fds and
 * calls lb_ws_step; messages arrive whole, in order, in lb_ws_take.
 *
 * TLS is always verified: the CA given (PEM), else the system's; the host name is checked. A
 * refused upgrade keeps the server's HTTP status (lb_ws_status) so the caller can ask the same
 * URL over plain HTTP for the server's reason. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <libwebsockets.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYSTEM_CAS "/etc/ssl/certs/ca-certificates.crt"

typedef struct ws_msg {
	struct ws_msg *next;
	size_t len;
	unsigned char *data; /* LWS_PRE bytes of headroom first when outgoing */
} ws_msg;

struct lb_ws {
	struct lws_context *ctx;
	struct lws *wsi;
	enum lb_ws_state state;
	int status; /* the upgrade's HTTP status when it was refused, else 0 */
	int close_code;
	char protocol[64];
	char err[512];
	char *headers; /* "Name: value\n" lines, appended to the handshake */
	ws_msg *out, *out_tail;
	ws_msg *in, *in_tail;
	unsigned char *part; /* a message still arriving */
	size_t part_len, part_cap;
	bool closing; /* the caller asked for a close */
};

static void msg_free_all(ws_msg *m)
{
	while (m) {
		ws_msg *n = m->next;
		free(m->data);
		free(m);
		m = n;
	}
}

static void fail(lb_ws *w, const char *why)
{
	if (w->state == LB_WS_FAILED || w->state == LB_WS_CLOSED)
		return;
	w->state = LB_WS_FAILED;
	snprintf(w->err, sizeof w->err, "%s", why && *why ? why : "the connection failed");
}

static int append_headers(lb_ws *w, struct lws *wsi, unsigned char **p, unsigned char *end)
{
	char *line = w->headers;
	while (line && *line) {
		char *nl = strchr(line, '\n');
		char *colon = strchr(line, ':');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		if (colon && colon < line + len) {
			char name[128];
			size_t nlen = (size_t)(colon - line) + 1;
			if (nlen >= sizeof name)
				return -1;
			memcpy(name, line, nlen);
			name[nlen] = '\0';
			const char *value = colon + 1;
			while (*value == ' ')
				value++;
			if (lws_add_http_header_by_name(wsi, (const unsigned char *)name,
							(const unsigned char *)value,
							(int)(line + len - value), p, end))
				return -1;
		}
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* A message larger than this fails the connection: what a server sends is never trusted to be
 * small (an exec's output arrives in messages of a few KB). */
#define MAX_MESSAGE (64u << 20)

static int keep_part(lb_ws *w, const void *in, size_t len)
{
	if (w->part_len + len > MAX_MESSAGE)
		return -1;
	if (w->part_len + len > w->part_cap) {
		size_t cap = w->part_cap ? w->part_cap : 4096;
		while (cap < w->part_len + len)
			cap *= 2;
		unsigned char *p = realloc(w->part, cap);
		if (!p)
			return -1;
		w->part = p;
		w->part_cap = cap;
	}
	memcpy(w->part + w->part_len, in, len);
	w->part_len += len;
	return 0;
}

static int deliver_part(lb_ws *w)
{
	ws_msg *m = calloc(1, sizeof *m);
	if (!m)
		return -1;
	m->len = w->part_len;
	m->data = w->part ? w->part : malloc(1);
	if (!m->data) {
		free(m);
		return -1;
	}
	w->part = NULL;
	w->part_len = w->part_cap = 0;
	if (w->in_tail)
		w->in_tail->next = m;
	else
		w->in = m;
	w->in_tail = m;
	return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	lb_ws *w = lws_context_user(lws_get_context(wsi));
	(void)user;
	if (!w)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **p = in;
		return append_headers(w, wsi, p, *p + len);
	}
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR: {
		w->status = (int)lws_http_client_http_response(wsi);
		char why[400];
		snprintf(why, sizeof why, "%s", in ? (const char *)in : "the connection failed");
		w->wsi = NULL;
		fail(w, why);
		break;
	}
	case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
		/* the server's answer's headers are still there (not at ESTABLISHED) */
		if (lws_hdr_copy(wsi, w->protocol, sizeof w->protocol, WSI_TOKEN_PROTOCOL) < 0)
			w->protocol[0] = '\0';
		break;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		w->state = LB_WS_OPEN;
		if (w->out)
			lws_callback_on_writable(wsi);
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (keep_part(w, in, len) != 0) {
			fail(w, w->part_len + len > MAX_MESSAGE
					? "the server sent a message larger than 64 MiB"
					: "out of memory reading a message");
			return -1;
		}
		if (lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi) &&
		    deliver_part(w) != 0) {
			fail(w, "out of memory reading a message");
			return -1;
		}
		break;
	case LWS_CALLBACK_CLIENT_WRITEABLE: {
		ws_msg *m = w->out;
		if (!m) {
			if (w->closing) {
				lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
				return -1;
			}
			break;
		}
		if (lws_write(wsi, m->data + LWS_PRE, m->len, LWS_WRITE_BINARY) < (int)m->len) {
			fail(w, "writing to the connection failed");
			return -1;
		}
		w->out = m->next;
		if (!w->out)
			w->out_tail = NULL;
		free(m->data);
		free(m);
		if (w->out || w->closing)
			lws_callback_on_writable(wsi);
		break;
	}
	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		if (len >= 2)
			w->close_code = ((const unsigned char *)in)[0] << 8 |
					((const unsigned char *)in)[1];
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
		w->wsi = NULL;
		if (w->state != LB_WS_FAILED)
			w->state = LB_WS_CLOSED;
		break;
	default:
		break;
	}
	return 0;
}

static const struct lws_protocols protocols[] = {
	{"llmbox-ws", callback, 0, 65536, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

static void quiet(int level, const char *line)
{
	(void)level;
	(void)line;
}

lb_ws *lb_ws_open(const lb_ws_options *o, lb_error *err)
{
	lb_ws *w = calloc(1, sizeof *w);
	if (!w) {
		lb_fail(err, ENOMEM, "websocket: out of memory");
		return NULL;
	}
	w->state = LB_WS_CONNECTING;
	if (o->headers && !(w->headers = strdup(o->headers))) {
		free(w);
		lb_fail(err, ENOMEM, "websocket: out of memory");
		return NULL;
	}
	/* LLMBOX_WS_LOG=1: libwebsockets' errors and warnings on stderr, for diagnosing */
	const char *log = getenv("LLMBOX_WS_LOG");
	if (log && *log == '1')
		lws_set_log_level(LLL_ERR | LLL_WARN, NULL);
	else
		lws_set_log_level(0, quiet);
	struct lws_context_creation_info info;
	memset(&info, 0, sizeof info);
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
	info.user = w;
	info.gid = (gid_t)-1;
	info.uid = (uid_t)-1;
	/* an exec's command is in its URL: llmbox's run wrapper alone is some 15 KB of it */
	info.max_http_header_data = 65535;
	info.pt_serv_buf_size = 128 * 1024; /* the handshake is written in it whole */
	info.timeout_secs = o->connect_timeout_s > 0 ? (unsigned)o->connect_timeout_s : 30;
	if (o->tls) {
		if (o->ca_pem) {
			info.client_ssl_ca_mem = o->ca_pem;
			info.client_ssl_ca_mem_len = (unsigned)strlen(o->ca_pem);
		} else {
			info.client_ssl_ca_filepath = SYSTEM_CAS;
		}
		if (o->cert_pem && o->key_pem) {
			info.client_ssl_cert_mem = o->cert_pem;
			info.client_ssl_cert_mem_len = (unsigned)strlen(o->cert_pem);
			info.client_ssl_key_mem = o->key_pem;
			info.client_ssl_key_mem_len = (unsigned)strlen(o->key_pem);
		}
	}
	w->ctx = lws_create_context(&info);
	if (!w->ctx) {
		lb_fail(err, EPROTO,
			"websocket: the TLS settings were refused (the CA, or the client "
			"certificate and key, are not valid PEM)");
		lb_ws_free(w);
		return NULL;
	}
	if (strlen(o->path) > 60000) {
		lb_fail(err, E2BIG, "websocket: the request's path is %zu bytes, more than 60000",
			strlen(o->path));
		lb_ws_free(w);
		return NULL;
	}
	struct lws_client_connect_info ci;
	memset(&ci, 0, sizeof ci);
	ci.context = w->ctx;
	ci.address = o->host;
	ci.port = o->port;
	ci.path = o->path;
	ci.host = o->host;
	ci.origin = o->host;
	ci.ssl_connection = o->tls ? LCCSCF_USE_SSL : 0;
	ci.protocol = o->protocols;
	ci.local_protocol_name = protocols[0].name;
	ci.pwsi = &w->wsi;
	if (!lws_client_connect_via_info(&ci) && w->state != LB_WS_FAILED)
		fail(w, "the connection could not be started");
	return w;
}

int lb_ws_fds(lb_ws *w, struct pollfd *pf, int max, int *timeout_ms)
{
	*timeout_ms = -1;
	if (w->state == LB_WS_FAILED || w->state == LB_WS_CLOSED || !w->ctx)
		return 0;
	/* lws's own timers (the connect timeout) and data TLS already holds */
	*timeout_ms = lws_service_adjust_timeout(w->ctx, 200, 0);
	int fd = w->wsi ? lws_get_socket_fd(w->wsi) : -1;
	if (fd < 0 || max < 1) {
		if (*timeout_ms > 10)
			*timeout_ms = 10; /* resolving or connecting: no socket yet */
		return 0;
	}
	pf[0].fd = fd;
	pf[0].events = POLLIN;
	if (w->state == LB_WS_CONNECTING || w->out || w->closing)
		pf[0].events |= POLLOUT;
	pf[0].revents = 0;
	return 1;
}

int lb_ws_step(lb_ws *w, int wait_ms)
{
	if (w->ctx && w->state != LB_WS_FAILED && w->state != LB_WS_CLOSED) {
		if (wait_ms != 0) {
			struct pollfd pf[1];
			int timeout;
			int n = lb_ws_fds(w, pf, 1, &timeout);
			if (wait_ms > 0 && (timeout < 0 || timeout > wait_ms))
				timeout = wait_ms;
			if (n > 0 || timeout > 0)
				(void)poll(pf, (nfds_t)n, timeout);
		}
		/* a negative timeout: lws polls without waiting; several rounds let a handshake
		 * or a burst of frames go as far as it can now */
		for (int i = 0; i < 8 && w->ctx; i++) {
			if (lws_service(w->ctx, -1) < 0)
				break;
			if (w->state == LB_WS_FAILED || w->state == LB_WS_CLOSED)
				break;
			if (lws_service_adjust_timeout(w->ctx, 1, 0) != 0)
				break; /* nothing more is due without I/O */
		}
	}
	return (int)w->state;
}

int lb_ws_send(lb_ws *w, const void *data, size_t len, lb_error *err)
{
	if (w->state == LB_WS_FAILED || w->state == LB_WS_CLOSED || w->closing)
		return lb_fail(err, EPIPE, "websocket: the connection is closed");
	ws_msg *m = calloc(1, sizeof *m);
	if (m)
		m->data = malloc(LWS_PRE + len + 1);
	if (!m || !m->data) {
		free(m);
		return lb_fail(err, ENOMEM, "websocket: out of memory");
	}
	memcpy(m->data + LWS_PRE, data, len);
	m->len = len;
	if (w->out_tail)
		w->out_tail->next = m;
	else
		w->out = m;
	w->out_tail = m;
	if (w->wsi && w->state == LB_WS_OPEN)
		lws_callback_on_writable(w->wsi);
	return 0;
}

int lb_ws_take(lb_ws *w, unsigned char **data, size_t *len)
{
	ws_msg *m = w->in;
	if (!m)
		return 0;
	w->in = m->next;
	if (!w->in)
		w->in_tail = NULL;
	*data = m->data;
	*len = m->len;
	free(m);
	return 1;
}

void lb_ws_close(lb_ws *w)
{
	if (w->wsi && w->state == LB_WS_OPEN && !w->closing) {
		w->closing = true;
		lws_callback_on_writable(w->wsi);
	}
}

enum lb_ws_state lb_ws_state_of(const lb_ws *w)
{
	return w->state;
}
const char *lb_ws_error(const lb_ws *w)
{
	return w->err;
}
const char *lb_ws_protocol(const lb_ws *w)
{
	return w->protocol;
}
int lb_ws_status(const lb_ws *w)
{
	return w->status;
}
int lb_ws_close_code(const lb_ws *w)
{
	return w->close_code;
}
bool lb_ws_pending(const lb_ws *w)
{
	return w->out != NULL;
}

void lb_ws_free(lb_ws *w)
{
	if (!w)
		return;
	if (w->ctx) {
		struct lws_context *ctx = w->ctx;
		w->ctx = NULL;
		lws_context_destroy(ctx);
	}
	msg_free_all(w->out);
	msg_free_all(w->in);
	free(w->part);
	free(w->headers);
	free(w);
}
