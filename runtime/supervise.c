/* The caller's side of a run while it runs, as steps an event loop can drive (lb_active_*):
 * begin (hand a prestarted program its request), then steps that each do what is ready without
 * blocking — stream stdout and stderr to on_output, feed stdin, read the program's end from its
 * init (or from the program itself, on the fast path), stop the run when a limit the supervisor
 * enforces fires (the wall clock, the output cap, a fork the pids limit refused) — and end: the
 * verdict (verdict.c) and the teardown (chain.c). lb_run_finish is a small loop over them. */
#define _GNU_SOURCE
#include "supervision.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

const char *lb_limit_name(enum lb_limit l)
{
	static const char *const names[] = {NULL,	 "timeout", "cpu",	"memory",
					    "processes", "output",  "file_size"};
	return (unsigned)l < sizeof names / sizeof names[0] ? names[l] : NULL;
}

int lb_buf_append(struct buf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static int send_all(int fd, const char *d, size_t len, lb_error *err)
{
	size_t off = 0;
	while (off < len) {
		ssize_t w = send(fd, d + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return lb_fail_sys(err, errno,
					   "handing the code to the prestarted program");
		off += (size_t)w;
	}
	return 0;
}

/* Prestarted runs: the request, then EOF (the program reads until the end); the socket stays
 * open for the program's exit report (see llmbox.h). A cell is framed instead, and the socket
 * stays open both ways for the cells after it (cell.c). */
static int hand_request(lb_pending *p, const lb_run_io *io, lb_error *err)
{
	const char *req = io->request ? io->request : "";
	if (io->cell_tag) {
		char head[128];
		int n = snprintf(head, sizeof head, "cell %s %zu\n", io->cell_tag, io->request_len);
		if (n < 0 || (size_t)n >= sizeof head || strchr(io->cell_tag, ' ') ||
		    strchr(io->cell_tag, '\n'))
			return lb_fail(err, EINVAL, "a cell's tag must be a short word");
		if (send_all(p->ctl, head, (size_t)n, err) < 0)
			return -1;
		return send_all(p->ctl, req, io->request_len, err);
	}
	if (send_all(p->ctl, req, io->request_len, err) < 0)
		return -1;
	shutdown(p->ctl, SHUT_WR);
	return 0;
}

/* Stops the run for `limit` (LB_LIMIT_NONE: the caller's side failed). Which limit fired must
 * not depend on how often the loop looks: a fork the pids limit refused before this stop came
 * first, even if the loop has not read pids.events since. */
void lb_sup_stop_for(struct supervision *s, enum lb_limit limit)
{
	if (s->o.killed)
		return;
	if (limit != LB_LIMIT_NONE && limit != LB_LIMIT_PROCESSES && s->p->limits.processes &&
	    lb_cgroup_pids_refused(&s->p->cg))
		limit = LB_LIMIT_PROCESSES;
	lb_run_stop(s->p);
	s->o.killed = true;
	s->o.limit = limit;
}

/* The caller's side failed (the first failure is the one reported): the run is stopped and
 * lb_run_finish returns the error. */
void lb_sup_abort_run(struct supervision *s, int code, const char *msg)
{
	if (!s->aborted)
		lb_fail(s->err, code, "%s", msg);
	lb_sup_stop_for(s, LB_LIMIT_NONE);
	s->aborted = true;
}

/* Hands on what stream i (FD_OUT, FD_ERR) holds beyond what was sent: up to its last newline, or
 * all of it when `all`. A failing callback aborts the run. */
void lb_sup_stream_out(struct supervision *s, int i, bool all)
{
	const struct buf *b = &s->out[i];
	struct stream_state *st = &s->streams[i];
	if (!s->io->on_output || s->aborted)
		return;
	size_t end = b->len;
	if (!all && b->len - st->sent < LINE_HOLD_MAX) {
		const char *nl = memrchr(b->data + st->sent, '\n', b->len - st->sent);
		end = nl ? (size_t)(nl - b->data) + 1 : st->sent;
	}
	size_t from = st->sent;
	if (end > from) {
		st->sent = end;
		st->held_since = 0;
	}
	if (st->sent < b->len && !st->held_since)
		st->held_since = lb_now_ms();
	if (end > from && s->io->on_output(s->io->ud, i == FD_OUT ? LB_STDOUT : LB_STDERR,
					   b->data + from, end - from))
		lb_sup_abort_run(s, ECANCELED, "the output callback failed");
}

/* A partial line whose end did not come in time, or whose stream ended. */
void lb_sup_flush_held(struct supervision *s)
{
	for (int i = FD_OUT; i <= FD_ERR; i++)
		if (s->streams[i].held_since &&
		    (s->fd[i] < 0 || lb_now_ms() - s->streams[i].held_since >= LINE_WAIT_MS))
			lb_sup_stream_out(s, i, true);
}

/* One chunk of stdout (i = FD_OUT) or stderr (FD_ERR): kept up to the output cap, which stops
 * the run, and passed to the caller's callback. */
ssize_t lb_sup_read_output(struct supervision *s, int i)
{
	char chunk[65536];
	ssize_t r = read(s->fd[i], chunk, sizeof chunk);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return -1;
	if (r <= 0) {
		lb_close_fd(&s->fd[i]); /* what is held is handed on by flush_held */
		return 0;
	}
	size_t keep = (size_t)r;
	if (s->max_output && s->total_out + keep > s->max_output) {
		keep = s->max_output - s->total_out;
		/* a cell is interrupted, its interpreter kept; a run is stopped */
		if (s->cell)
			lb_cell_interrupt(s, LB_LIMIT_OUTPUT);
		else
			lb_sup_stop_for(s, LB_LIMIT_OUTPUT);
		s->res->truncated = true;
	}
	s->total_out += keep;
	if (keep == 0)
		return r;
	if (lb_buf_append(&s->out[i], chunk, keep) < 0) {
		lb_sup_abort_run(s, ENOMEM, "out of memory for the run's output");
		return r;
	}
	lb_sup_stream_out(s, i, false);
	return r;
}

/* The init's record of the program's end; EOF when the init is gone without one. */
static void read_status(struct supervision *s)
{
	struct status_msg m;
	if (lb_read_full(s->fd[FD_STATUS], &m, sizeof m) == (ssize_t)sizeof m) {
		s->o.final = m; /* the kernel's word wins over the program's report */
		s->o.got_status = true;
	} else {
		lb_close_fd(&s->fd[FD_STATUS]);
	}
}

static void feed_stdin(struct supervision *s)
{
	const lb_run_io *io = s->io;
	ssize_t w = lb_write_nosigpipe(s->fd[FD_IN], io->stdin_data + s->stdin_off,
				       io->stdin_len - s->stdin_off);
	if (w > 0)
		s->stdin_off += (size_t)w;
	if ((w < 0 && errno != EAGAIN && errno != EINTR) || s->stdin_off >= io->stdin_len)
		lb_close_fd(&s->fd[FD_IN]);
}

/* Prestarted programs: "exit STATUS UTIME_US STIME_US MAXRSS_KB PROBE\n" on the control socket
 * says the program is done and how. */
static void read_exit_report(struct supervision *s)
{
	ssize_t r = read(s->fd[FD_CTL], s->report_line + s->report_len,
			 sizeof s->report_line - 1 - s->report_len);
	if (r > 0)
		s->report_len += (size_t)r;
	s->report_line[s->report_len] = '\0';
	int code, probe;
	unsigned long long ut, st, rss;
	if (!s->o.got_status && !s->o.killed && strchr(s->report_line, '\n') &&
	    sscanf(s->report_line, "exit %d %llu %llu %llu %d", &code, &ut, &st, &rss, &probe) ==
		    5 &&
	    code >= 0 && code <= 255) {
		struct status_msg *f = &s->o.final;
		f->wstatus = code << 8;
		f->ru.ru_utime.tv_sec = (time_t)(ut / 1000000);
		f->ru.ru_utime.tv_usec = (suseconds_t)(ut % 1000000);
		f->ru.ru_stime.tv_sec = (time_t)(st / 1000000);
		f->ru.ru_stime.tv_usec = (suseconds_t)(st % 1000000);
		f->ru.ru_maxrss = (long)rss;
		f->probe = probe != 0;
		s->o.got_status = true;
		/* What is left of the run would die with its init anyway: end it now instead of
		 * waiting for the interpreter's teardown. Not a kill for a limit. */
		lb_run_stop(s->p);
	}
	if (r <= 0 || strchr(s->report_line, '\n') || s->report_len >= sizeof s->report_line - 1)
		lb_close_fd(&s->fd[FD_CTL]);
}

/* Milliseconds until `at` (at least 0), or `wait` when that comes first (-1: forever). */
static int sooner(int wait, double at)
{
	double left = at - lb_now_ms();
	int l = left <= 0 ? 0 : (int)left + 1;
	return wait < 0 || l < wait ? l : wait;
}

/* How long poll may sleep: until the deadline, the next look at pids.events, or the time a
 * held partial line is due. */
static int poll_timeout(const struct supervision *s)
{
	int wait = -1;
	if (s->p->cg.version && s->p->limits.processes)
		wait = PIDS_CHECK_MS;
	if (s->deadline && !s->o.killed)
		wait = sooner(wait, s->deadline);
	for (int i = FD_OUT; i <= FD_ERR; i++)
		if (s->streams[i].held_since)
			wait = sooner(wait, s->streams[i].held_since + LINE_WAIT_MS);
	return wait;
}

static void check_clock_and_pids(struct supervision *s)
{
	if (s->o.killed)
		return;
	if (s->deadline && lb_now_ms() >= s->deadline) {
		/* a cell is interrupted first; one that outlives its grace ends the run */
		if (s->cell && !s->interrupted)
			lb_cell_interrupt(s, LB_LIMIT_TIMEOUT);
		else
			lb_sup_stop_for(s, s->cell ? s->cell_limit : LB_LIMIT_TIMEOUT);
		return;
	}
	/* A fork bomb ends the run as soon as it shows. */
	if (s->p->cg.version && s->p->limits.processes &&
	    lb_now_ms() - s->pids_checked >= PIDS_CHECK_MS) {
		s->pids_checked = lb_now_ms();
		if (lb_cgroup_pids_refused(&s->p->cg))
			lb_sup_stop_for(s, LB_LIMIT_PROCESSES);
	}
}

/* Done when the output has ended and the status is in: the status pipe's own EOF waits for the
 * teardown of the run's namespaces, which the result does not need. */
static bool supervision_over(const struct supervision *s)
{
	const int *fd = s->fd;
	if (s->cell_done)
		return true;
	return !(fd[FD_OUT] >= 0 || fd[FD_ERR] >= 0 || (fd[FD_STATUS] >= 0 && !s->o.got_status));
}

static void poll_set(const struct supervision *s, struct pollfd pf[N_FDS])
{
	for (int i = 0; i < N_FDS; i++)
		pf[i] = (struct pollfd){.fd = s->fd[i], .events = i == FD_IN ? POLLOUT : POLLIN};
}

/* What poll found: output first (it may fire the output cap), then the status, stdin, the
 * program's own report, and the clock. */
static void handle_ready(struct supervision *s, const struct pollfd pf[N_FDS], int n)
{
	const int *fd = s->fd;
	const short ready = POLLIN | POLLHUP | POLLERR;
	for (int i = FD_OUT; i <= FD_ERR && n > 0; i++)
		if (pf[i].revents & ready)
			lb_sup_read_output(s, i);
	lb_sup_flush_held(s);
	if (n > 0 && fd[FD_STATUS] >= 0 && (pf[FD_STATUS].revents & ready))
		read_status(s);
	if (n > 0 && fd[FD_IN] >= 0 && (pf[FD_IN].revents & (POLLOUT | POLLERR | POLLHUP)))
		feed_stdin(s);
	if (n > 0 && fd[FD_CTL] >= 0 && (pf[FD_CTL].revents & ready)) {
		if (s->cell)
			lb_cell_read_answer(s);
		else
			read_exit_report(s);
	}
	check_clock_and_pids(s);
}

int lb_active_begin(lb_pending *p, const lb_run_io *io, lb_active **out, lb_error *err)
{
	*out = NULL;
	lb_active *a = calloc(1, sizeof *a);
	if (!a) {
		lb_run_abandon(p);
		return lb_fail(err, ENOMEM, "out of memory");
	}
	if (io->cell_tag && p->ctl < 0) {
		lb_run_abandon(p);
		free(a);
		return lb_fail(err, EINVAL,
			       "a cell needs an interactive program that is still running");
	}
	if (p->ctl >= 0) {
		if (hand_request(p, io, err) < 0) {
			lb_run_abandon(p);
			free(a);
			return -1;
		}
		p->start = lb_now_ms(); /* its wall clock starts with the request */
	}
	a->io = *io;
	struct supervision *s = &a->s;
	*s = (struct supervision){
		.p = p, .io = &a->io, .res = &a->res, .err = &a->err, .cell = io->cell_tag != NULL};
	double timeout = io->timeout > 0 ? io->timeout : p->limits.timeout;
	s->deadline = timeout > 0 ? p->start + timeout * 1e3 : 0;
	s->max_output = io->output ? io->output : p->limits.output;
	s->pids_checked = p->start;
	int *owned[N_FDS] = {&p->out, &p->err, &p->status, &p->in, &p->ctl};
	for (int i = 0; i < N_FDS; i++) {
		s->fd[i] = *owned[i];
		*owned[i] = -1;
	}
	if (s->fd[FD_IN] >= 0 && (!io->stdin_data || io->stdin_len == 0))
		lb_close_fd(&s->fd[FD_IN]);
	/* a cell's output is read to its current end when the answer comes */
	for (int i = FD_OUT; s->cell && i <= FD_ERR; i++)
		if (s->fd[i] >= 0)
			fcntl(s->fd[i], F_SETFL, fcntl(s->fd[i], F_GETFL) | O_NONBLOCK);
	a->over = supervision_over(s);
	*out = a;
	return 0;
}

int lb_active_fds(const lb_active *a, struct pollfd *pf, int max, int *timeout_ms)
{
	struct pollfd all[N_FDS];
	int n = 0;
	poll_set(&a->s, all);
	for (int i = 0; i < N_FDS && n < max; i++)
		if (all[i].fd >= 0 && !a->over)
			pf[n++] = all[i];
	*timeout_ms = a->over ? 0 : poll_timeout(&a->s);
	return n;
}

int lb_active_step(lb_active *a, int wait_ms)
{
	struct supervision *s = &a->s;
	if (a->over)
		return 1;
	struct pollfd pf[N_FDS];
	poll_set(s, pf);
	int t = poll_timeout(s);
	if (wait_ms >= 0 && (t < 0 || t > wait_ms))
		t = wait_ms;
	int n = poll(pf, N_FDS, t);
	if (n < 0 && errno != EINTR) {
		int code = errno;
		char msg[128];
		snprintf(msg, sizeof msg, "poll: %s", strerror(code));
		lb_sup_abort_run(s, code, msg);
		a->over = true;
		return 1;
	}
	handle_ready(s, pf, n < 0 ? 0 : n);
	a->over = supervision_over(s);
	return a->over;
}

void lb_active_abort(lb_active *a, const char *why)
{
	lb_sup_abort_run(&a->s, ECANCELED, why);
}

char *lb_sup_take_buf(struct buf *b, size_t *len)
{
	char *d = b->data ? b->data : strdup("");
	*len = b->data ? b->len : 0;
	b->data = NULL;
	return d;
}

int lb_active_end(lb_active *a, lb_result *res, lb_error *err)
{
	struct supervision *s = &a->s;
	lb_pending *p = s->p;
	/* Ended early: stop the run and see its streams to their end (the run is being killed). */
	if (!a->over)
		lb_active_abort(a, "the run was ended before it finished");
	while (!lb_active_step(a, -1))
		;
	if (s->cell_done && !s->o.killed && !s->aborted)
		return lb_cell_end(a, res);
	/* a cell that did not end with an answer ended its program: its state is gone */
	if (s->cell)
		lb_run_stop(p);
	for (int i = 0; i < N_FDS; i++)
		lb_close_fd(&s->fd[i]);
	a->res.duration_ms = lb_now_ms() - p->start;
	lb_error setup = {0};
	bool setup_failed = lb_read_report(p->report, &setup);
	/* Read before the cgroups may go to the graveyard below. */
	lb_cgroup_usage usage;
	lb_cgroup_read(&p->cg, &usage);
	/* A prestarted run that ended normally is collected later (see lb_reap). */
	lb_run_collect(p, p->prestarted && s->o.got_status && !s->o.killed && !setup_failed);
	int rc = -1;
	if (s->aborted) {
		*err = a->err;
	} else if (lb_verdict(p, &s->o, setup_failed ? &setup : NULL, &usage, &a->res, err) == 0) {
		if (setup_failed && setup.msg[0] == EXEC_MARK) {
			/* The command could not be started: told like a shell would. */
			lb_buf_append(&s->out[1], "llmbox: ", 8);
			lb_buf_append(&s->out[1], setup.msg + 1, strlen(setup.msg + 1));
			lb_buf_append(&s->out[1], "\n", 1);
			/* streamed like the program's own stderr would have been */
			lb_sup_stream_out(s, FD_ERR, true);
		}
		*res = a->res;
		res->out = lb_sup_take_buf(&s->out[0], &res->out_len);
		res->err = lb_sup_take_buf(&s->out[1], &res->err_len);
		res->state_lost = s->cell;
		res->interrupted = s->interrupted;
		if (s->cell && s->interrupted && res->limit == LB_LIMIT_NONE)
			res->limit = s->cell_limit;
		rc = 0;
	}
	lb_run_abandon(p); /* frees what is left */
	free(s->out[0].data);
	free(s->out[1].data);
	free(s->ctl_in.data);
	free(s->value.data);
	free(a);
	return rc;
}

void lb_active_discard(lb_active *a)
{
	if (!a)
		return;
	struct supervision *s = &a->s;
	for (int i = 0; i < N_FDS; i++)
		lb_close_fd(&s->fd[i]);
	lb_run_discard(s->p);
	free(s->out[0].data);
	free(s->out[1].data);
	free(s->ctl_in.data);
	free(s->value.data);
	free(a);
}

int lb_run_finish(lb_pending *p, const lb_run_io *io, lb_result *res, lb_error *err)
{
	lb_active *a;
	memset(res, 0, sizeof *res);
	if (lb_active_begin(p, io, &a, err) < 0)
		return -1;
	while (!lb_active_step(a, -1))
		;
	return lb_active_end(a, res, err);
}

int lb_run(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_result *res,
	   lb_error *err)
{
	lb_pending *p;
	memset(res, 0, sizeof *res);
	if (spec->prestart)
		return lb_fail(err, EINVAL, "lb_run: a prestarted run needs lb_run_begin");
	if (lb_run_begin(j, spec, filter, &p, err) < 0)
		return -1;
	lb_run_io io = {.stdin_data = spec->stdin_data,
			.stdin_len = spec->stdin_len,
			.on_output = spec->on_output,
			.ud = spec->ud};
	return lb_run_finish(p, &io, res, err);
}

void lb_result_free(lb_result *res)
{
	free(res->out);
	free(res->err);
	free(res->value);
	res->out = res->err = res->value = NULL;
}
