/* The native backend: our own jail (runtime/), needing nothing but the kernel. A session is one
 * jail plus the seccomp program compiled from its policy. */
#include "backend.h"
#include "../runtime/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct native_session {
	lb_jail *jail;
	lb_filter *filter;
	lb_egress *egress;	   /* NULL: the jail's own network (loopback only) */
	lb_egress *install_egress; /* library installs' network, made on the first one */
} native_session;

void lb_native_close(void *s)
{
	native_session *n = s;
	if (!n)
		return;
	lb_egress_close(n->egress);
	lb_egress_close(n->install_egress);
	lb_jail_close(n->jail);
	lb_filter_free(n->filter);
	free(n);
}

void *lb_native_session_new(lb_jail *jail, lb_filter *filter)
{
	native_session *n = calloc(1, sizeof *n);
	if (n) {
		n->jail = jail;
		n->filter = filter;
	}
	return n;
}

/* A jail being opened (with the session it will become) or emptied. */
typedef struct native_task {
	lb_jail_task *task;
	native_session *opening; /* NULL for an emptying */
} native_task;

static int native_open_start(const lb_open_config *cfg, void **out, lb_error *err)
{
	native_task *t = calloc(1, sizeof *t);
	native_session *n = calloc(1, sizeof *n);
	if (!t || !n) {
		free(t);
		free(n);
		err->code = ENOMEM;
		snprintf(err->msg, sizeof err->msg, "out of memory");
		return -1;
	}
	t->opening = n;
	/* Compile the filter first: a policy error is reported before any namespace is made. */
	if (!(n->filter = lb_filter_build(&cfg->syscalls, err)) ||
	    !(t->task = lb_jail_open_begin(&cfg->jail, err))) {
		lb_native_close(n);
		free(t);
		return -1;
	}
	*out = t;
	return 0;
}

int lb_native_reset_start(void *s, void **out, lb_error *err)
{
	native_task *t = calloc(1, sizeof *t);
	if (!t) {
		err->code = ENOMEM;
		snprintf(err->msg, sizeof err->msg, "out of memory");
		return -1;
	}
	if (!(t->task = lb_jail_reset_begin(((native_session *)s)->jail, err))) {
		free(t);
		return -1;
	}
	*out = t;
	return 0;
}

int lb_native_task_fds(void *t, struct pollfd *pf, int max, int *timeout_ms)
{
	int fd = lb_jail_task_fd(((native_task *)t)->task);
	/* No fd: the next step is due now. */
	*timeout_ms = fd < 0 ? 0 : -1;
	if (fd < 0 || max < 1)
		return 0;
	pf[0] = (struct pollfd){.fd = fd, .events = POLLIN};
	return 1;
}

int lb_native_task_step(void *t, int wait_ms)
{
	return lb_jail_task_step(((native_task *)t)->task, wait_ms);
}

int lb_native_task_end(void *tp, void **session, lb_error *err)
{
	native_task *t = tp;
	native_session *n = t->opening;
	int rc = lb_jail_task_end(t->task, n ? &n->jail : NULL, err);
	free(t);
	if (n && (rc < 0 || !session))
		lb_native_close(n);
	else if (n)
		*session = n;
	return rc;
}

void lb_native_task_discard(void *tp)
{
	native_task *t = tp;
	if (!t)
		return;
	lb_jail_task_discard(t->task);
	lb_native_close(t->opening);
	free(t);
}

static void *native_open(const lb_open_config *cfg, lb_error *err)
{
	void *t, *session = NULL;
	if (native_open_start(cfg, &t, err) < 0 || lb_native_task_end(t, &session, err) < 0)
		return NULL;
	return session;
}

/* The jail a run enters: the session's, or for an install with a network (install_network) a
 * copy whose network namespace is the install egress's (the chain forks at once and keeps
 * neither). */
static lb_jail *run_jail(native_session *n, const lb_run_spec *spec, lb_jail *copy, lb_error *err)
{
	if (!spec->install_network)
		return n->jail;
	if (!n->install_egress) {
		lb_fail(err, EPERM,
			"this install needs a network (libraries.network), and the session has no "
			"install egress: installs never get the host's network");
		return NULL;
	}
	*copy = *n->jail;
	copy->netns = lb_egress_netns(n->install_egress);
	return copy;
}

int lb_native_run(void *s, const lb_run_spec *spec, lb_result *res, lb_error *err)
{
	native_session *n = s;
	lb_jail copy;
	lb_jail *j = run_jail(n, spec, &copy, err);
	return j ? lb_run(j, spec, n->filter, res, err) : -1;
}

int lb_native_copy_in(void *s, const char *host_path, const char *path, unsigned mode,
		      char *skipped, size_t skipped_len, lb_error *err)
{
	return lb_copy_in(((native_session *)s)->jail, host_path, path, mode, skipped, skipped_len,
			  err);
}

int lb_native_copy_out(void *s, const char *path, const char *host_path, uint64_t max,
		       char *skipped, size_t skipped_len, lb_error *err)
{
	return lb_copy_out(((native_session *)s)->jail, path, host_path, max, skipped, skipped_len,
			   err);
}

int lb_native_collect(void *s, const char *path, uint64_t max, lb_entry_fn fn, void *ud,
		      lb_error *err)
{
	return lb_collect(((native_session *)s)->jail, path, max, fn, ud, err);
}

int lb_native_prestart(void *s, const lb_run_spec *spec, void **pending, lb_error *err)
{
	native_session *n = s;
	lb_jail copy;
	lb_jail *j = run_jail(n, spec, &copy, err);
	return j ? lb_run_begin(j, spec, n->filter, (lb_pending **)pending, err) : -1;
}

int lb_native_pending_wait(void *p, int timeout_ms)
{
	return lb_run_wait_ready(p, timeout_ms);
}

int lb_native_pending_finish(void *p, const lb_run_io *io, lb_result *res, lb_error *err)
{
	return lb_run_finish(p, io, res, err);
}

void lb_native_pending_abandon(void *p)
{
	lb_run_abandon(p);
}

void lb_native_pending_discard(void *p)
{
	lb_run_discard(p);
}

int lb_native_start(void *s, const lb_run_spec *spec, void **run, lb_error *err)
{
	native_session *n = s;
	if (spec->prestart) {
		err->code = EINVAL;
		snprintf(err->msg, sizeof err->msg, "start: a prestarted run needs prestart");
		return -1;
	}
	lb_pending *p;
	lb_jail copy;
	lb_jail *j = run_jail(n, spec, &copy, err);
	if (!j || lb_run_begin(j, spec, n->filter, &p, err) < 0)
		return -1;
	lb_run_io io = {.stdin_data = spec->stdin_data,
			.stdin_len = spec->stdin_len,
			.on_output = spec->on_output,
			.ud = spec->ud};
	return lb_active_begin(p, &io, (lb_active **)run, err);
}

int lb_native_pending_start(void *p, const lb_run_io *io, void **run, lb_error *err)
{
	return lb_active_begin(p, io, (lb_active **)run, err);
}

int lb_native_reset(void *s, lb_error *err)
{
	void *t;
	return lb_native_reset_start(s, &t, err) < 0 ? -1 : lb_native_task_end(t, NULL, err);
}

int lb_native_egress(void *s, const char *ruleset, const char *pasta, bool installs, lb_error *err)
{
	native_session *n = s;
	lb_egress **slot = installs ? &n->install_egress : &n->egress;
	if (*slot)
		return lb_fail(err, EEXIST, "this session has that egress already");
	lb_egress *e = lb_egress_open(n->jail, ruleset, pasta, err);
	if (!e)
		return -1;
	/* the session's runs: in the egress namespace from now on; installs: per run (run_jail) */
	if (!installs && lb_jail_use_netns(n->jail, lb_egress_netns(e), err) < 0) {
		lb_egress_close(e);
		return -1;
	}
	*slot = e;
	return 0;
}

int lb_native_egress_denied(void *s, bool installs, char **out, lb_error *err)
{
	native_session *n = s;
	lb_egress *e = installs ? n->install_egress : n->egress;
	if (!e)
		return lb_fail(err, EINVAL, "this session has no such egress");
	return lb_egress_denied(e, n->jail, out, err);
}

const lb_backend lb_backend_native = {
	.name = "native",
	.caps = LB_CAP_POOL | LB_CAP_PERSISTENT_WORKSPACE | LB_CAP_NETWORK_POLICY | LB_CAP_SECCOMP |
		LB_CAP_INTERACTIVE | LB_CAP_ROOTFS | LB_CAP_RUN_LIMITS | LB_CAP_EGRESS,
	.open = native_open,
	.run = lb_native_run,
	.copy_in = lb_native_copy_in,
	.copy_out = lb_native_copy_out,
	.collect = lb_native_collect,
	.close = lb_native_close,
	.prestart = lb_native_prestart,
	.pending_wait = lb_native_pending_wait,
	.pending_finish = lb_native_pending_finish,
	.pending_abandon = lb_native_pending_abandon,
	.reset = lb_native_reset,
	.pending_discard = lb_native_pending_discard,
	.start = lb_native_start,
	.pending_start = lb_native_pending_start,
	.run_fds = lb_active_op_fds,
	.run_step = lb_active_op_step,
	.run_abort = lb_active_op_abort,
	.run_end = lb_active_op_end,
	.run_discard = lb_active_op_discard,
	.open_start = native_open_start,
	.reset_start = lb_native_reset_start,
	.task_fds = lb_native_task_fds,
	.task_step = lb_native_task_step,
	.task_end = lb_native_task_end,
	.task_discard = lb_native_task_discard,
	.egress = lb_native_egress,
	.egress_denied = lb_native_egress_denied,
};

const lb_backend *const lb_backends[] = {&lb_backend_native, &lb_backend_bubblewrap,
					 &lb_backend_nsjail, NULL};
