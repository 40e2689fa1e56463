/* HTTP for the engine drivers (Docker, Podman, Kubernetes): one libcurl multi handle that an
 * event loop drives, never blocking it. The loop asks which sockets to watch and how long until
 * curl's next timer (lb_http_fds), then lets the handle work (lb_http_step); the CLI's blocking
 * calls are a small loop over the same two calls. Bodies are kept per request until the caller
 * takes them, so a streamed response (an exec's output, a pull's progress) reaches the caller as
 * it arrives, and callbacks run in the caller's frames, not in libcurl's.
 *
 * Ownership: the caller owns the lb_http and each lb_http_req it began. A request holds a
 * reference on its handle, so lb_http_free may come first: the handle goes when its last
 * request is ended or discarded. TLS peers are always verified (CA file or the system's).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <curl/curl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define MAX_SOCKETS	 64
#define MAX_HEADER_BYTES (64 * 1024)

struct lb_http {
	CURLM *multi;
	int refs;      /* the owner (until lb_http_free) and each live request */
	bool closed;   /* the owner let go */
	int running;   /* transfers curl still works on */
	long long due; /* monotonic ms of curl's timer; -1 none */
	struct pollfd socks[MAX_SOCKETS];
	int nsocks;
};

struct lb_http_req {
	lb_http *h;
	CURL *easy;
	struct curl_slist *headers;
	char errbuf[CURL_ERROR_SIZE];
	char *unix_socket; /* for messages: where we connected */
	bool connect_only; /* a raw stream once connected (lb_http_send, lb_http_recv) */
	bool done;
	CURLcode result;
	uint64_t max_body, received;
	bool too_big;	/* the body passed max_body */
	bool head_full; /* the header lines passed MAX_HEADER_BYTES */
	char *body;	/* what arrived and was not taken yet */
	size_t body_len, body_cap;
	char *head; /* the response's header lines, as received */
	size_t head_len, head_cap;
};

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t want = *cap ? *cap : 4096;
		while (want < *len + n + 1)
			want *= 2;
		char *nb = realloc(*buf, want);
		if (!nb)
			return -1;
		*buf = nb;
		*cap = want;
	}
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* ---- what curl tells us: the sockets to watch and when its timer is due ---- */

static int on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *socketp)
{
	(void)easy;
	(void)socketp;
	lb_http *h = ud;
	int i = 0;
	while (i < h->nsocks && h->socks[i].fd != s)
		i++;
	if (what == CURL_POLL_REMOVE) {
		if (i < h->nsocks)
			h->socks[i] = h->socks[--h->nsocks];
		return 0;
	}
	if (i == h->nsocks) {
		if (h->nsocks == MAX_SOCKETS)
			return -1; /* curl fails that transfer */
		h->nsocks++;
	}
	h->socks[i] = (struct pollfd){
		.fd = s,
		.events = (short)((what & CURL_POLL_IN ? POLLIN : 0) |
				  (what & CURL_POLL_OUT ? POLLOUT : 0)),
	};
	return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *ud)
{
	(void)multi;
	lb_http *h = ud;
	h->due = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	return 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
	lb_http_req *r = ud;
	size_t len = size * n;
	r->received += len;
	if (r->max_body && r->received > r->max_body) {
		r->too_big = true;
		return 0; /* CURLE_WRITE_ERROR ends the transfer */
	}
	return append(&r->body, &r->body_len, &r->body_cap, data, len) < 0 ? 0 : len;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
	lb_http_req *r = ud;
	size_t len = size * n;
	/* A redirect or "100 Continue" starts a new block: keep only the last response's. */
	if (len > 5 && memcmp(data, "HTTP/", 5) == 0)
		r->head_len = 0;
	if (r->head_len + len > MAX_HEADER_BYTES) {
		r->head_full = true;
		return 0;
	}
	return append(&r->head, &r->head_len, &r->head_cap, data, len) < 0 ? 0 : len;
}

/* ---- the handle ---- */

lb_http *lb_http_new(lb_error *err)
{
	static bool global_done;
	if (!global_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			lb_fail(err, EIO, "curl_global_init failed");
			return NULL;
		}
		global_done = true;
	}
	lb_http *h = calloc(1, sizeof *h);
	if (!h || !(h->multi = curl_multi_init())) {
		free(h);
		lb_fail(err, ENOMEM, "curl_multi_init failed");
		return NULL;
	}
	h->refs = 1;
	h->due = -1;
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
	return h;
}

static void unref(lb_http *h)
{
	if (--h->refs > 0)
		return;
	curl_multi_cleanup(h->multi);
	free(h);
}

void lb_http_free(lb_http *h)
{
	if (!h || h->closed)
		return;
	h->closed = true;
	unref(h);
}

static int set_options(lb_http_req *r, const lb_http_request *rq, lb_error *err)
{
	CURL *e = r->easy;
	const char *method = rq->method ? rq->method : "GET";
	CURLcode c = CURLE_OK;
#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (c == CURLE_OK)                                                                 \
			c = curl_easy_setopt(e, opt, val);                                         \
	} while (0)
	SET(CURLOPT_URL, rq->url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_ERRORBUFFER, r->errbuf);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, r);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, r);
	SET(CURLOPT_PRIVATE, r);
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	if (rq->unix_socket)
		SET(CURLOPT_UNIX_SOCKET_PATH, rq->unix_socket);
	if (rq->ca_file)
		SET(CURLOPT_CAINFO, rq->ca_file);
	if (rq->cert_file)
		SET(CURLOPT_SSLCERT, rq->cert_file);
	if (rq->key_file)
		SET(CURLOPT_SSLKEY, rq->key_file);
	struct curl_blob ca = {(void *)rq->ca_pem, rq->ca_pem_len, CURL_BLOB_COPY},
			 cert = {(void *)rq->cert_pem, rq->cert_pem_len, CURL_BLOB_COPY},
			 key = {(void *)rq->key_pem, rq->key_pem_len, CURL_BLOB_COPY};
	if (rq->ca_pem)
		SET(CURLOPT_CAINFO_BLOB, &ca);
	if (rq->cert_pem) {
		SET(CURLOPT_SSLCERT_BLOB, &cert);
		SET(CURLOPT_SSLCERTTYPE, "PEM");
	}
	if (rq->key_pem) {
		SET(CURLOPT_SSLKEY_BLOB, &key);
		SET(CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (rq->timeout_ms > 0)
		SET(CURLOPT_TIMEOUT_MS, rq->timeout_ms);
	if (rq->connect_only)
		SET(CURLOPT_CONNECT_ONLY, 1L);
	if (rq->connect_timeout_ms > 0)
		SET(CURLOPT_CONNECTTIMEOUT_MS, rq->connect_timeout_ms);
	if (strcmp(method, "HEAD") == 0)
		SET(CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0)
		SET(CURLOPT_CUSTOMREQUEST, method);
	if (rq->body) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
		SET(CURLOPT_COPYPOSTFIELDS, rq->body);
	}
	for (const char *const *hd = rq->headers; hd && *hd && c == CURLE_OK; hd++) {
		struct curl_slist *l = curl_slist_append(r->headers, *hd);
		if (!l)
			return lb_fail(err, ENOMEM, "out of memory for the request's headers");
		r->headers = l;
	}
	/* curl would send "Expect: 100-continue" for larger bodies and wait for it. */
	struct curl_slist *l = curl_slist_append(r->headers, "Expect:");
	if (!l)
		return lb_fail(err, ENOMEM, "out of memory for the request's headers");
	r->headers = l;
	SET(CURLOPT_HTTPHEADER, r->headers);
#undef SET
	if (c != CURLE_OK)
		return lb_fail(err, EINVAL, "%s %s: %s", method, rq->url, curl_easy_strerror(c));
	return 0;
}

static void req_free(lb_http_req *r)
{
	if (r->easy) {
		curl_multi_remove_handle(r->h->multi, r->easy);
		curl_easy_cleanup(r->easy);
	}
	curl_slist_free_all(r->headers);
	free(r->body);
	free(r->head);
	free(r->unix_socket);
	unref(r->h);
	free(r);
}

lb_http_req *lb_http_begin(lb_http *h, const lb_http_request *rq, lb_error *err)
{
	if (!rq->url) {
		lb_fail(err, EINVAL, "the request has no URL");
		return NULL;
	}
	lb_http_req *r = calloc(1, sizeof *r);
	if (!r) {
		lb_fail(err, ENOMEM, "out of memory");
		return NULL;
	}
	r->h = h;
	h->refs++;
	r->max_body = rq->max_body;
	r->connect_only = rq->connect_only;
	if (rq->unix_socket && !(r->unix_socket = strdup(rq->unix_socket))) {
		lb_fail(err, ENOMEM, "out of memory");
		req_free(r);
		return NULL;
	}
	if (!(r->easy = curl_easy_init())) {
		lb_fail(err, ENOMEM, "curl_easy_init failed");
		req_free(r);
		return NULL;
	}
	if (set_options(r, rq, err) < 0) {
		req_free(r);
		return NULL;
	}
	CURLMcode m = curl_multi_add_handle(h->multi, r->easy);
	if (m != CURLM_OK) {
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
		lb_fail(err, EIO, "curl_multi_add_handle: %s", curl_multi_strerror(m));
		req_free(r);
		return NULL;
	}
	h->running++;
	return r;
}

int lb_http_fds(lb_http *h, struct pollfd *pf, int max, int *timeout_ms)
{
	int n = h->nsocks < max ? h->nsocks : max;
	memcpy(pf, h->socks, (size_t)n * sizeof *pf);
	if (h->due < 0) {
		*timeout_ms = -1;
	} else {
		long long left = h->due - now_ms();
		*timeout_ms = left < 0 ? 0 : (int)left;
	}
	return n;
}

/* Marks the transfers curl finished. */
static void harvest(lb_http *h)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(h->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		lb_http_req *r = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		if (r && !r->done) {
			r->done = true;
			r->result = msg->data.result;
		}
	}
}

int lb_http_step(lb_http *h, int wait_ms)
{
	struct pollfd pf[MAX_SOCKETS];
	int timer;
	int n = lb_http_fds(h, pf, MAX_SOCKETS, &timer);
	int wait = wait_ms;
	if (timer >= 0 && (wait < 0 || timer < wait))
		wait = timer;
	if (wait < 0 && n == 0)
		wait = 0; /* nothing to wait for: curl has no transfer */
	int ready = poll(pf, (nfds_t)n, wait);
	if (ready < 0 && errno != EINTR)
		return -1;
	int running = h->running;
	for (int i = 0; ready > 0 && i < n; i++) {
		if (!pf[i].revents)
			continue;
		int ev = (pf[i].revents & (POLLIN | POLLHUP | POLLERR) ? CURL_CSELECT_IN : 0) |
			 (pf[i].revents & POLLOUT ? CURL_CSELECT_OUT : 0) |
			 (pf[i].revents & POLLERR ? CURL_CSELECT_ERR : 0);
		curl_multi_socket_action(h->multi, pf[i].fd, ev, &running);
	}
	if (h->due >= 0 && h->due <= now_ms()) {
		h->due = -1;
		curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	}
	h->running = running;
	harvest(h);
	return running;
}

bool lb_http_done(const lb_http_req *r)
{
	return r->done;
}

const char *lb_http_body(const lb_http_req *r, size_t *len)
{
	*len = r->body_len;
	return r->body ? r->body : "";
}

void lb_http_consume(lb_http_req *r, size_t len)
{
	if (len >= r->body_len) {
		r->body_len = 0;
		return;
	}
	memmove(r->body, r->body + len, r->body_len - len);
	r->body_len -= len;
}

/* The cause of a failed transfer as an errno and a sentence that names the peer. */
static int fail_transfer(lb_http_req *r, lb_error *err)
{
	const char *url = NULL;
	curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &url);
	char peer[PATH_MAX + 512];
	snprintf(peer, sizeof peer, "%s%s%s", url ? url : "?", r->unix_socket ? " through " : "",
		 r->unix_socket ? r->unix_socket : "");
	if (r->too_big)
		return lb_fail(err, EFBIG,
			       "%s: the response is larger than the limit of %llu bytes", peer,
			       (unsigned long long)r->max_body);
	if (r->head_full)
		return lb_fail(err, EFBIG, "%s: the response's headers pass %d bytes", peer,
			       MAX_HEADER_BYTES);
	long os_errno = 0;
	curl_easy_getinfo(r->easy, CURLINFO_OS_ERRNO, &os_errno);
	int code = EIO;
	switch (r->result) {
	case CURLE_OPERATION_TIMEDOUT:
		code = ETIMEDOUT;
		break;
	case CURLE_COULDNT_CONNECT:
		code = os_errno > 0 ? (int)os_errno : ECONNREFUSED;
		break;
	case CURLE_COULDNT_RESOLVE_HOST:
		code = EHOSTUNREACH;
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CONNECT_ERROR:
		code = EPROTO;
		break;
	default:
		break;
	}
	/* With a unix socket curl's own words name a host and port that played no part. */
	const char *why =
		r->errbuf[0] && !r->unix_socket ? r->errbuf : curl_easy_strerror(r->result);
	if (os_errno > 0 && r->result == CURLE_COULDNT_CONNECT)
		return lb_fail(err, code, "%s: %s (%s)", peer, why, strerror((int)os_errno));
	return lb_fail(err, code, "%s: %s", peer, why);
}

int lb_http_end(lb_http_req *r, lb_http_response *res, lb_error *err)
{
	int rc = 0;
	*res = (lb_http_response){0};
	if (!r->done)
		rc = lb_fail(err, EINPROGRESS, "the request has not finished");
	else if (r->result != CURLE_OK)
		rc = fail_transfer(r, err);
	if (rc == 0) {
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &res->status);
		res->headers = r->head;
		res->headers_len = r->head_len;
		r->head = NULL;
	}
	req_free(r);
	return rc;
}

void lb_http_discard(lb_http_req *r)
{
	if (!r)
		return;
	if (!r->done)
		r->h->running--;
	req_free(r);
}

/* ---- raw streams (connect_only) ---- */

/* The connection of a finished connect_only request, or -1 with err filled. */
static int stream_ready(lb_http_req *r, lb_error *err)
{
	if (!r->connect_only)
		return lb_fail(err, EINVAL, "the request is not a stream (connect_only)");
	if (!r->done)
		return lb_fail(err, EINPROGRESS, "the stream is not connected yet");
	if (r->result != CURLE_OK)
		return fail_transfer(r, err);
	return 0;
}

int lb_http_fd(lb_http_req *r)
{
	curl_socket_t s = CURL_SOCKET_BAD;
	if (!r->connect_only || !r->done || r->result != CURLE_OK ||
	    curl_easy_getinfo(r->easy, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK)
		return -1;
	return s == CURL_SOCKET_BAD ? -1 : (int)s;
}

int lb_http_send(lb_http_req *r, const char *buf, size_t len, size_t *sent, lb_error *err)
{
	*sent = 0;
	if (stream_ready(r, err) < 0)
		return -1;
	CURLcode c = curl_easy_send(r->easy, buf, len, sent);
	if (c == CURLE_AGAIN)
		return 1;
	if (c != CURLE_OK)
		return lb_fail(err, EPIPE, "sending on the stream: %s", curl_easy_strerror(c));
	return 0;
}

int lb_http_recv(lb_http_req *r, char *buf, size_t cap, size_t *got, lb_error *err)
{
	*got = 0;
	if (stream_ready(r, err) < 0)
		return -1;
	CURLcode c = curl_easy_recv(r->easy, buf, cap, got);
	if (c == CURLE_AGAIN)
		return 1;
	if (c != CURLE_OK)
		return lb_fail(err, EIO, "reading the stream: %s", curl_easy_strerror(c));
	return 0;
}

/* TLS's half-close: the close_notify alert, which the peer reads as the end of its input (as
 * Docker's own client ends an exec's stdin, Go's tls.Conn.CloseWrite); reading goes on until
 * the peer's own close_notify. The TCP connection stays whole: TLS may still need to write. */
static int tls_close_notify(lb_http_req *r, lb_error *err)
{
	struct curl_tlssessioninfo *info = NULL;
	if (curl_easy_getinfo(r->easy, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || !info ||
	    info->backend != CURLSSLBACKEND_OPENSSL || !info->internals)
		return lb_fail(err, EOPNOTSUPP,
			       "this libcurl's TLS stream cannot be half-closed (not OpenSSL)");
	SSL *ssl = info->internals;
	int fd = lb_http_fd(r);
	for (int tries = 0; tries < 50; tries++) {
		ERR_clear_error();
		int rc = SSL_shutdown(ssl);
		if (rc >= 0)
			return 0; /* sent (1: the peer's came too) */
		int e = SSL_get_error(ssl, rc);
		if ((e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) || fd < 0) {
			const char *why = ERR_reason_error_string(ERR_get_error());
			return lb_fail(err, EPROTO, "ending the TLS stream's input: %s",
				       why ? why : "SSL_shutdown failed");
		}
		struct pollfd p = {.fd = fd,
				   .events = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
		poll(&p, 1, 100);
	}
	return lb_fail(err, ETIMEDOUT,
		       "ending the TLS stream's input: the alert could not be sent within 5 s");
}

int lb_http_shutdown_write(lb_http_req *r, lb_error *err)
{
	if (stream_ready(r, err) < 0)
		return -1;
	const char *scheme = NULL;
	curl_easy_getinfo(r->easy, CURLINFO_SCHEME, &scheme);
	if (scheme && strcasecmp(scheme, "https") == 0)
		return tls_close_notify(r, err);
	int fd = lb_http_fd(r);
	if (fd < 0 || shutdown(fd, SHUT_WR) < 0)
		return lb_fail_sys(err, fd < 0 ? EBADF : errno, "ending the stream's input");
	return 0;
}
