/* The process chain of a run, from fork to reaping (the caller is never changed):
 *
 *   caller ── C1: llmbox's run helper (run_helper.c), vfork'd and exec'd with the run's
 *   │             description (chain_wire.c). Joins the run's cgroups and the jail's
 *   │             namespaces, unshares new pid, ipc and mount namespaces for this run, clones
 *   │             C2 (sharing C1's memory), keeps only CAP_KILL, then waits for the caller's
 *   │             word to end the run (lb_run_stop): it kills C2, reaps it and exits.
 *   │        └─ C2: pid 1 of the run's pid namespace. Mounts this run's /proc, becomes the
 *   │                sandbox user with no capabilities, writes the run's files, forks C3, reaps.
 *   │                When C3 ends, C2 reports C3's status and exits, and the kernel kills
 *   │                everything left in the pid namespace: nothing a run started survives it.
 *   │             └─ C3: the program. setsid, stdio pipes, rlimits, seccomp, execve.
 *   └─ the caller supervises the run (supervise.c), then stops and reaps C1.
 *
 * Every process is reaped by its own parent, on every path: the caller never kills C1, because
 * C2 would then outlive it as an orphan that only the nearest subreaper (or pid 1 of the
 * caller's pid namespace, which may be llmbox itself, in a container started without --init)
 * could bury. Killing C2 empties the run's pid namespace, so one kill, by C2's own parent, ends
 * the whole run; and C1, which alone may reap C2, cannot be confused by a recycled pid.
 *
 * The jail side (C1, C2, C3) is chain_child.c; this file is the caller's.
 *
 * Two error channels are kept apart (the isolate way): a CLOEXEC report pipe carries "the sandbox
 * broke" records from C1/C2/C3 setup, and the status pipe carries the program's own result.
 */
#define _GNU_SOURCE
#include "run.h"

#include <dirent.h>
#include <linux/capability.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <limits.h>
#include <time.h>

/* The run helper's absolute path (lb_set_run_helper), "" until it is set; why the last setting
 * failed, for the runs that then cannot start. */
static char run_helper[PATH_MAX];
static char run_helper_err[sizeof((lb_error *)0)->msg];

int lb_set_run_helper(const char *path, lb_error *err)
{
	char real[PATH_MAX];
	int r = 0;
	if (!path || !realpath(path, real))
		r = lb_fail_sys(err, path ? errno : EINVAL, "llmbox's run helper %s",
				path ? path : "(no path)");
	else if (access(real, X_OK) < 0)
		r = lb_fail_sys(err, errno, "llmbox's run helper %s", real);
	if (r < 0) {
		snprintf(run_helper_err, sizeof run_helper_err, "%s", err->msg);
		return r;
	}
	snprintf(run_helper, sizeof run_helper, "%s", real);
	return 0;
}

const char *lb_run_helper(void)
{
	return run_helper[0] ? run_helper : NULL;
}

double lb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

pid_t lb_exec_helper(int job, const int *pass, size_t n, int report_w, lb_error *err)
{
	if (!run_helper[0]) {
		if (run_helper_err[0])
			return lb_fail(err, ENOENT, "%s (run make, or reinstall llmbox)",
				       run_helper_err);
		return lb_fail(
			err, ENOENT,
			"llmbox's run helper (llmbox-run, beside the C module) was not found: "
			"run make, or reinstall llmbox");
	}
	char job_arg[16], rep_arg[16];
	snprintf(job_arg, sizeof job_arg, "%d", job);
	snprintf(rep_arg, sizeof rep_arg, "%d", report_w);
	char *const argv[] = {"llmbox-run", job_arg, rep_arg, NULL};
	char *const envp[] = {NULL};
	/* Signals stay blocked until the helper resets them: no handler of the caller's runs in
	 * the child, which shares the caller's memory until the execve. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = vfork();
	if (pid == 0) {
		fcntl(job, F_SETFD, 0);
		for (size_t i = 0; i < n; i++)
			if (pass[i] >= 0)
				fcntl(pass[i], F_SETFD, 0);
		execve(run_helper, argv, envp);
		lb_child_fail(report_w, errno, "starting llmbox's run helper %s", run_helper);
	}
	int code = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0)
		return lb_fail_sys(err, code, "vfork");
	return pid;
}

void lb_close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

void lb_run_stop(lb_pending *p)
{
	if (p->stop < 0)
		return;
	/* A byte, not just EOF: a copy of this end that another fork of the caller holds for a
	 * moment must not delay the request. C1 may be gone already (a setup failure): no SIGPIPE.
	 */
	(void)lb_write_nosigpipe(p->stop, "x", 1);
	lb_close_fd(&p->stop);
}

/* Prestarted runs whose result is in but whose processes are still going away: tearing down a
 * run's pid and mount namespaces takes a millisecond or two, which a pool's caller need not wait
 * for. lb_run_begin, lb_reap and the Lua state's end (lua_core.c) collect them. */
#define MAX_GRAVES 256
static struct grave {
	pid_t c1;
	lb_cgroup cg;
} graves[MAX_GRAVES];
static size_t n_graves;
static pthread_mutex_t graves_lock = PTHREAD_MUTEX_INITIALIZER;

void lb_reap(bool block)
{
	pthread_mutex_lock(&graves_lock);
	size_t keep = 0;
	for (size_t i = 0; i < n_graves; i++) {
		pid_t r;
		while ((r = waitpid(graves[i].c1, NULL, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
			;
		if (r == 0)
			graves[keep++] = graves[i];
		else
			lb_cgroup_destroy(&graves[i].cg);
	}
	n_graves = keep;
	pthread_mutex_unlock(&graves_lock);
}

static bool bury(lb_pending *p)
{
	pthread_mutex_lock(&graves_lock);
	bool room = n_graves < MAX_GRAVES;
	if (room) {
		graves[n_graves++] = (struct grave){.c1 = p->c1, .cg = p->cg};
		p->c1 = -1;
		memset(&p->cg, 0, sizeof p->cg);
	}
	pthread_mutex_unlock(&graves_lock);
	return room;
}

void lb_bury_pid(pid_t pid)
{
	pthread_mutex_lock(&graves_lock);
	bool room = n_graves < MAX_GRAVES;
	if (room)
		graves[n_graves++] = (struct grave){.c1 = pid};
	pthread_mutex_unlock(&graves_lock);
	while (!room && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

void lb_run_collect(lb_pending *p, bool defer)
{
	lb_run_stop(p);
	if (p->c1 > 0 && !(defer && bury(p))) {
		while (waitpid(p->c1, NULL, 0) < 0 && errno == EINTR)
			;
		p->c1 = -1;
	}
	lb_cgroup_destroy(&p->cg);
}

void lb_run_discard(lb_pending *p)
{
	if (!p)
		return;
	/* Stopped now; its first child is collected by lb_reap, so the caller never waits. Without
	 * room in the graveyard, it is waited for here after all (it dies at once: it was told). */
	lb_run_collect(p, true);
	int *fds[] = {&p->out, &p->err, &p->status, &p->report, &p->in, &p->ctl};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		lb_close_fd(fds[i]);
	free(p);
}

void lb_run_abandon(lb_pending *p)
{
	if (!p)
		return;
	lb_run_collect(p, false);
	int *fds[] = {&p->out, &p->err, &p->status, &p->report, &p->in, &p->ctl};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		lb_close_fd(fds[i]);
	free(p);
}

int lb_run_begin(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_pending **out,
		 lb_error *err)
{
	int o[2] = {-1, -1}, e[2] = {-1, -1}, in[2] = {-1, -1}, st[2] = {-1, -1}, rp[2] = {-1, -1},
	    ctl[2] = {-1, -1}, stop[2] = {-1, -1}, job = -1;
	*out = NULL;
	if (!spec->argv || !spec->argv[0])
		return lb_fail(err, EINVAL, "empty command");
	lb_pending *p = calloc(1, sizeof *p);
	if (!p)
		return lb_fail(err, ENOMEM, "out of memory");
	lb_reap(false);
	p->c1 = -1;
	p->prestarted = spec->prestart;
	p->out = p->err = p->status = p->report = p->in = p->ctl = p->stop = -1;
	p->limits = spec->limits;
	/* A prestarted program gets its stdin later: the pipe must exist now. */
	bool want_in = spec->stdin_data || spec->prestart;
	/* A prestarted run holds its descriptors until it is used: it may not take the ones that
	 * runs need (see lb_fd_check). */
	if (spec->prestart && lb_fd_check(LB_FDS_PENDING, "prestart a run", err) < 0)
		goto fail;
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0 ||
	    pipe2(rp, O_CLOEXEC) < 0 || pipe2(stop, O_CLOEXEC) < 0 ||
	    (want_in && pipe2(in, O_CLOEXEC) < 0) ||
	    (spec->prestart && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0)) {
		lb_fail_sys(err, errno, "creating the run's pipes");
		goto fail;
	}
	if (lb_cgroup_create(&p->cg, &spec->limits, err) < 0)
		goto fail;
	struct child_fds fds = {in[0], o[1], e[1], st[1], rp[1], -1, stop[0], ctl[1]};
	job = memfd_create("llmbox-run-job", MFD_CLOEXEC);
	if (job < 0) {
		lb_fail_sys(err, errno, "memfd_create");
		goto fail;
	}
	if (lb_chain_encode(job, getpid(), j, spec, filter, &fds, &p->cg, err) < 0)
		goto fail;
	p->start = lb_now_ms();
	int pass[16] = {fds.in_r,     fds.out_w,  fds.err_w, fds.status_w,
			fds.report_w, fds.stop_r, fds.ctl};
	p->c1 = lb_exec_helper(job, pass, lb_jail_keep_fds(j, pass, 7), fds.report_w, err);
	if (p->c1 < 0)
		goto fail;
	lb_close_fd(&job);
	p->out = o[0];
	p->err = e[0];
	p->status = st[0];
	p->report = rp[0];
	p->in = in[1];
	p->ctl = ctl[0];
	p->stop = stop[1];
	int *child_ends[] = {&o[1], &e[1], &st[1], &rp[1], &in[0], &ctl[1], &stop[0]};
	for (size_t i = 0; i < sizeof child_ends / sizeof child_ends[0]; i++)
		lb_close_fd(child_ends[i]);
	if (p->in >= 0)
		fcntl(p->in, F_SETFL, O_NONBLOCK);
	*out = p;
	return 0;
fail:;
	int *all[] = {&o[0],  &o[1],  &e[0],   &e[1],	&in[0],	  &in[1],   &st[0], &st[1],
		      &rp[0], &rp[1], &ctl[0], &ctl[1], &stop[0], &stop[1], &job};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		lb_close_fd(all[i]);
	lb_run_abandon(p);
	return -1;
}

int lb_run_wait_ready(lb_pending *p, int timeout_ms)
{
	if (p->ctl < 0)
		return -1;
	struct pollfd pf = {.fd = p->ctl, .events = POLLIN};
	int n;
	while ((n = poll(&pf, 1, p->ready ? 0 : timeout_ms)) < 0 && errno == EINTR)
		;
	if (n == 0)
		return p->ready ? 1 : 0;
	char c;
	ssize_t r = n > 0 ? recv(p->ctl, &c, 1, MSG_DONTWAIT) : -1;
	if (r == 1 && c == 'R' && !p->ready) {
		p->ready = true;
		return 1;
	}
	return -1; /* EOF or anything unexpected: the program is gone or broken */
}
