/* A supervised process without a jail (lb_spawn), for backends whose sandbox is another program
 * (bubblewrap, nsjail): the same pipes, limits, setup report, verdict and step API (lb_active)
 * as a jailed run, and the same promise that nothing the program started outlives it.
 *
 *   caller ── S: joins the run's cgroups, becomes a child subreaper, vforks the program, then
 *   │            waits for the program's end or for the caller's word to stop. Either way it
 *   │            then kills what is left of the tree — the program's process group and every
 *   │            process that reparented to S (a subreaper inherits the orphans of its whole
 *   │            tree, so a daemon that left its group is still found) — until none is left;
 *   │            reports the program's status, and exits when the caller says so.
 *   │        └─ the program: setsid, stdio pipes, rlimits, the filter if one is given, execve.
 *   └─ the caller supervises it like any run (supervise.c), then stops and reaps S.
 */
#define _GNU_SOURCE
#include "../backends/backend.h"
#include "run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* S's own children: the program, and every orphan of its tree. */
static size_t children(pid_t *out, size_t max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
	FILE *f = fopen(path, "re");
	size_t n = 0;
	int pid;
	while (f && n < max && fscanf(f, "%d", &pid) == 1)
		out[n++] = pid;
	if (f)
		fclose(f);
	return n;
}

/* Kills the program's group and every child of S, reaps them, and goes on while new orphans
 * reparent to S. Everything was SIGKILLed, so each wait is short. */
static void kill_tree(pid_t group)
{
	kill(-group, SIGKILL);
	for (;;) {
		pid_t kids[256];
		size_t n = children(kids, 256);
		for (size_t i = 0; i < n; i++) {
			kill(kids[i], SIGKILL);
			kill(-kids[i], SIGKILL); /* the group it may lead */
		}
		pid_t r;
		while ((r = waitpid(-1, NULL, n ? 0 : WNOHANG)) < 0 && errno == EINTR)
			;
		if (r < 0 && errno == ECHILD)
			return;
		if (r <= 0 && n == 0)
			return;
	}
}

/* S. Never returns. */
_Noreturn static void supervise_spawn(const lb_run_spec *spec, const lb_filter *filter,
				      struct child_fds *fds, const lb_cgroup *cg, pid_t parent)
{
	int rep = fds->report_w;
	lb_child_begin(rep, parent, cg);
	/* Orphans of the program's tree come to S, which can then end them. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		lb_child_fail(rep, errno, "becoming a child subreaper");
	pid_t prog = vfork();
	if (prog < 0)
		lb_child_fail(rep, errno, "fork of the program");
	if (prog == 0)
		lb_exec_program(spec, filter, fds, cg);
	lb_close_fd(&fds->out_w);
	lb_close_fd(&fds->err_w);
	lb_close_fd(&fds->in_r);
	lb_close_fd(&fds->report_w);
	int pidfd = (int)syscall(SYS_pidfd_open, prog, 0);
	struct status_msg msg = {0};
	bool ended = false, stopped = false;
	while (!ended && !stopped) {
		struct pollfd pf[2] = {{.fd = fds->stop_r, .events = POLLIN},
				       {.fd = pidfd, .events = POLLIN}};
		/* Without pidfds (Linux < 5.3), look every 10 ms. */
		int n = poll(pf, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 10);
		if (n < 0 && errno != EINTR)
			break;
		int st;
		struct rusage ru;
		if (wait4(prog, &st, WNOHANG, &ru) == prog) {
			msg.wstatus = st;
			msg.ru = ru;
			ended = true;
		} else if (n > 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			stopped = true;
		}
	}
	kill_tree(prog);
	if (ended)
		(void)lb_write_all(fds->status_w, &msg, sizeof msg);
	lb_close_fd(&fds->status_w);
	if (!stopped) {
		char c;
		while (read(fds->stop_r, &c, 1) < 0 && errno == EINTR)
			;
	}
	_exit(0);
}

int lb_spawn(const lb_run_spec *spec, const lb_filter *filter, lb_pending **out, lb_error *err)
{
	int o[2] = {-1, -1}, e[2] = {-1, -1}, in[2] = {-1, -1}, st[2] = {-1, -1}, rp[2] = {-1, -1},
	    stop[2] = {-1, -1};
	*out = NULL;
	if (!spec->argv || !spec->argv[0])
		return lb_fail(err, EINVAL, "empty command");
	if (!spec->cwd)
		return lb_fail(err, EINVAL, "spawn: a working directory is required");
	if (spec->prestart || spec->n_files || spec->n_clean || spec->probe)
		return lb_fail(
			err, EINVAL,
			"spawn: files, clean, probe and prestart need a jail (lb_run_begin)");
	lb_pending *p = calloc(1, sizeof *p);
	if (!p)
		return lb_fail(err, ENOMEM, "out of memory");
	lb_reap(false);
	p->c1 = -1;
	p->out = p->err = p->status = p->report = p->in = p->ctl = p->stop = -1;
	p->limits = spec->limits;
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0 ||
	    pipe2(rp, O_CLOEXEC) < 0 || pipe2(stop, O_CLOEXEC) < 0 ||
	    (spec->stdin_data && pipe2(in, O_CLOEXEC) < 0)) {
		lb_fail_sys(err, errno, "creating the pipes");
		goto fail;
	}
	if (lb_cgroup_create(&p->cg, &spec->limits, err) < 0)
		goto fail;
	p->start = lb_now_ms();
	pid_t parent = getpid();
	p->c1 = fork();
	if (p->c1 < 0) {
		lb_fail_sys(err, errno, "fork");
		goto fail;
	}
	if (p->c1 == 0) {
		struct child_fds fds = {in[0], o[1], e[1], st[1], rp[1], -1, stop[0], -1};
		int keep[] = {in[0], o[1], e[1], st[1], rp[1], stop[0]};
		lb_close_fds_except(keep, 6);
		supervise_spawn(spec, filter, &fds, &p->cg, parent);
	}
	p->out = o[0];
	p->err = e[0];
	p->status = st[0];
	p->report = rp[0];
	p->in = in[1];
	p->stop = stop[1];
	int *child_ends[] = {&o[1], &e[1], &st[1], &rp[1], &in[0], &stop[0]};
	for (size_t i = 0; i < sizeof child_ends / sizeof child_ends[0]; i++)
		lb_close_fd(child_ends[i]);
	if (p->in >= 0)
		fcntl(p->in, F_SETFL, O_NONBLOCK);
	*out = p;
	return 0;
fail:;
	int *all[] = {&o[0],  &o[1],  &e[0],  &e[1],  &in[0],	&in[1],
		      &st[0], &st[1], &rp[0], &rp[1], &stop[0], &stop[1]};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		lb_close_fd(all[i]);
	lb_run_abandon(p);
	return -1;
}

int lb_active_op_fds(void *run, struct pollfd *pf, int max, int *timeout_ms)
{
	return lb_active_fds(run, pf, max, timeout_ms);
}

int lb_active_op_step(void *run, int wait_ms)
{
	return lb_active_step(run, wait_ms);
}

void lb_active_op_abort(void *run, const char *why)
{
	lb_active_abort(run, why);
}

int lb_active_op_end(void *run, lb_result *res, lb_error *err)
{
	return lb_active_end(run, res, err);
}

void lb_active_op_discard(void *run)
{
	lb_active_discard(run);
}

const lb_backend lb_spawn_ops = {.name = "spawn",
				 .run_fds = lb_active_op_fds,
				 .run_step = lb_active_op_step,
				 .run_abort = lb_active_op_abort,
				 .run_end = lb_active_op_end,
				 .run_discard = lb_active_op_discard};
