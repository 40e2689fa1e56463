/* The bubblewrap backend: bwrap builds the jail, llmbox runs in it.
 *
 * Opening a session runs bwrap with the command line llmbox.backends.bubblewrap made from the
 * policy (new user, mount, pid, net, ipc, uts and cgroup namespaces; a tmpfs root holding only
 * the policy's read-only paths; size-limited tmpfs workspace, /tmp and /dev/shm; a minimal /dev;
 * /proc; the root read-only), plus what only this driver can add: /etc's files as memfds
 * (--ro-bind-data), the policy's seccomp program (--seccomp), --info-fd and --block-fd, and the
 * program to start, bwrap_done.c (exit 0), exec'd through /proc/self/fd so nothing of llmbox's is
 * placed in the jail. bwrap runs as the host uid the sandbox user maps to (nobody when llmbox
 * runs as root, never host root), so the jail is that user's, as a native one is.
 *
 * bwrap reports the pid of the jail's first process on the info fd; that process builds the
 * jail, then waits on the block fd before it starts the program. Meanwhile llmbox opens its
 * namespaces (it cannot exit before it is let go, so the pid names it) and checks them (their
 * types; the user namespace's owner), then lets it go. The program exits 0 and bwrap with it:
 * only then was the jail built completely, and only then is the session handed out. From then on
 * it is a native session (lb_native_*): the namespaces held as fds, every run, copy and emptying
 * done by the core entering them, each run in new pid and ipc namespaces with the seccomp filter,
 * no capabilities and the policy's limits. No user code runs in the jail before that.
 *
 * Opening is a task an event loop drives: the info pipe until its end, then a pidfd of bwrap
 * until it has exited; bwrap's stderr is the error. */
#define _GNU_SOURCE
#include "backend.h"
#include "../runtime/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { BW_WAIT_PID, BW_WAIT_EXIT, BW_OVER };

typedef struct bwrap_task {
	void *reset; /* an emptying (native's task), or NULL for an opening */
	int state;
	pid_t pid;
	int pidfd, info, block, errfd;
	char said[256]; /* what came on the info fd */
	size_t said_len;
	lb_jail *jail; /* filled from the namespaces of the jail's first process */
	lb_filter *filter;
	bool failed;
	lb_error err;
} bwrap_task;

static void task_free(bwrap_task *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	lb_close_fd(&t->pidfd);
	lb_close_fd(&t->info);
	lb_close_fd(&t->block);
	lb_close_fd(&t->errfd);
	lb_jail_close(t->jail);
	lb_filter_free(t->filter);
	free(t);
}

/* What bwrap said on stderr, one line, for an error message. */
static void read_stderr(bwrap_task *t, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t r;
	while (n + 1 < len && (r = read(t->errfd, buf + n, len - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = (p[1] ? ' ' : '\0');
}

static int open_ns(pid_t pid, const char *name, int type, bool optional)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return optional && errno == ENOENT ? -1 : -2;
	if (ioctl(fd, NS_GET_NSTYPE) != type) {
		close(fd);
		return -2;
	}
	return fd;
}

/* Takes the namespaces of the jail's first process, named on the info fd, and lets it go on;
 * false (and t->err) when there is none or they are not right. */
static bool take_namespaces(bwrap_task *t)
{
	t->said[t->said_len] = '\0';
	const char *at = strstr(t->said, "\"child-pid\":");
	long pid = at ? strtol(at + strlen("\"child-pid\":"), NULL, 10) : 0;
	if (pid <= 0) {
		/* bwrap failed before it made the jail, and says why on stderr once it has exited */
		t->failed = true;
		lb_fail(&t->err, EIO, "bubblewrap could not build the sandbox");
		return false;
	}
	lb_jail *j = t->jail;
	j->userns = open_ns((pid_t)pid, "user", CLONE_NEWUSER, false);
	j->mntns = open_ns((pid_t)pid, "mnt", CLONE_NEWNS, false);
	j->netns = open_ns((pid_t)pid, "net", CLONE_NEWNET, false);
	j->utsns = open_ns((pid_t)pid, "uts", CLONE_NEWUTS, false);
	j->cgroupns = open_ns((pid_t)pid, "cgroup", CLONE_NEWCGROUP, true);
	uid_t owner;
	/* (the user namespace is the one bwrap made as the sandbox user's host uid) */
	bool ok = j->userns >= 0 && j->mntns >= 0 && j->netns >= 0 && j->utsns >= 0 &&
		  j->cgroupns != -2 && ioctl(j->userns, NS_GET_OWNER_UID, &owner) == 0 &&
		  owner == j->host_uid;
	if (j->cgroupns == -2)
		j->cgroupns = -1;
	if (!ok) {
		t->failed = true;
		lb_fail(&t->err, EPROTO,
			"the namespaces of the bubblewrap sandbox's first process (pid %ld) could "
			"not be taken",
			pid);
		return false;
	}
	char go = 'g';
	if (write(t->block, &go, 1) != 1) {
		t->failed = true;
		lb_fail_sys(&t->err, errno, "letting the bubblewrap sandbox go on");
		return false;
	}
	return true;
}

/* One step of an opening; 1 when it is over. */
static int open_step(bwrap_task *t, int wait_ms)
{
	if (t->state == BW_OVER)
		return 1;
	struct pollfd pf = {.fd = t->state == BW_WAIT_PID ? t->info : t->pidfd, .events = POLLIN};
	if (pf.fd >= 0 && wait_ms != 0) {
		int r = poll(&pf, 1, wait_ms);
		if (r <= 0)
			return 0;
	} else if (pf.fd >= 0 && poll(&pf, 1, 0) <= 0) {
		return 0;
	}
	if (t->state == BW_WAIT_PID) {
		ssize_t n;
		while ((n = read(t->info, t->said + t->said_len,
				 sizeof t->said - 1 - t->said_len)) < 0 &&
		       errno == EINTR)
			;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n > 0 && t->said_len + (size_t)n < sizeof t->said - 1) {
			t->said_len += (size_t)n;
			return 0;
		}
		/* its end (bwrap closes it once it has written), or more than it ever says */
		if (n > 0)
			t->said_len += (size_t)n;
		take_namespaces(t);
		lb_close_fd(&t->info);
		lb_close_fd(&t->block); /* (bwrap's first process also goes on when it ends) */
		t->state = BW_WAIT_EXIT;
		return 0;
	}
	int st = 0;
	pid_t r;
	while ((r = waitpid(t->pid, &st, t->pidfd >= 0 ? WNOHANG : 0)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return 0;
	t->pid = -1;
	if (t->failed || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char said[sizeof t->err.msg / 2];
		read_stderr(t, said, sizeof said);
		char why[64];
		if (WIFSIGNALED(st))
			snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(st));
		else
			snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(st));
		if (!t->failed)
			lb_fail(&t->err, EIO, "bubblewrap could not build the sandbox");
		t->failed = true;
		size_t len = strlen(t->err.msg);
		snprintf(t->err.msg + len, sizeof t->err.msg - len, " (bwrap: %s%s%s)", why,
			 said[0] ? ": " : "", said);
	}
	t->state = BW_OVER;
	return 1;
}

/* The child that becomes bwrap: stdin and stdout /dev/null, stderr the error pipe, the listed
 * fds open across exec, running as the sandbox user's host uid. Never returns. */
static void exec_bwrap(char **argv, int errfd, const int *pass, size_t n_pass, const lb_jail *j,
		       pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	int null = open("/dev/null", O_RDWR);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(127);
	int keep[64];
	size_t n = 0;
	for (size_t i = 0; i < n_pass && n < sizeof keep / sizeof keep[0]; i++) {
		int fl = fcntl(pass[i], F_GETFD);
		if (fl < 0 || fcntl(pass[i], F_SETFD, fl & ~FD_CLOEXEC) < 0)
			_exit(127);
		keep[n++] = pass[i];
	}
	lb_close_fds_except(keep, n);
	if (geteuid() == 0 &&
	    (setgroups(0, NULL) < 0 || setresgid(j->host_gid, j->host_gid, j->host_gid) < 0 ||
	     setresuid(j->host_uid, j->host_uid, j->host_uid) < 0)) {
		dprintf(2, "switching to uid %d: %s\n", (int)j->host_uid, strerror(errno));
		_exit(127);
	}
	execv(argv[0], argv);
	dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* A memfd holding data at offset 0, or -1. */
static int data_fd(const char *name, const char *data, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd >= 0 && (lb_write_all(fd, data, len) < 0 || lseek(fd, 0, SEEK_SET) < 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int bwrap_open_start(const lb_open_config *cfg, void **out, lb_error *err)
{
	if (!cfg->wrap_argv || cfg->wrap_argc < 1 || !cfg->wrap_done)
		return lb_fail(err, EINVAL, "bubblewrap: the open config has no bwrap command line");
	if (cfg->n_wrap_files > 16)
		return lb_fail(err, E2BIG, "bubblewrap: at most 16 files are placed in a jail");
	bool root = geteuid() == 0;
	uid_t host_uid = root ? cfg->jail.host_uid : geteuid();
	if (root && host_uid == 0)
		return lb_fail(err, EINVAL,
			       "refusing to map the sandbox user to host root (host_uid = 0)");
	if (lb_fd_check(LB_FDS_SESSION, "open another sandbox session", err) < 0)
		return -1;
	bwrap_task *t = calloc(1, sizeof *t);
	lb_jail *j = calloc(1, sizeof *j);
	if (!t || !j) {
		free(t);
		free(j);
		return lb_fail(err, ENOMEM, "out of memory");
	}
	t->pid = -1;
	t->pidfd = t->info = t->block = t->errfd = -1;
	t->jail = j;
	j->userns = j->mntns = j->netns = j->utsns = j->cgroupns = -1;
	j->host_uid = host_uid;
	j->host_gid = root ? cfg->jail.host_gid : getegid();

	/* fds bwrap gets: the seccomp program, the program to start, the info and block pipes'
	 * ends, the files; ours: the other ends and bwrap's stderr */
	int pass[4 + 16], n_pass = 0, info[2] = {-1, -1}, block[2] = {-1, -1}, ep[2] = {-1, -1};
	char **argv = NULL;
	char(*num)[32] = NULL;
	/* Compile the filter first: a policy error is reported before any namespace is made. */
	if (!(t->filter = lb_filter_build(&cfg->syscalls, err)))
		goto fail;
	int seccomp = lb_filter_memfd(t->filter, err);
	if (seccomp < 0)
		goto fail;
	pass[n_pass++] = seccomp;
	int done = open(cfg->wrap_done, O_RDONLY | O_CLOEXEC);
	if (done < 0) {
		lb_fail_sys(err, errno, "opening %s (make builds it)", cfg->wrap_done);
		goto fail;
	}
	pass[n_pass++] = done;
	if (pipe2(info, O_CLOEXEC) < 0 || pipe2(block, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		lb_fail_sys(err, errno, "pipe2");
		goto fail;
	}
	pass[n_pass++] = info[1];
	pass[n_pass++] = block[0];
	/* bwrap, the files, the policy's part, 4 options with a number each, --, the program */
	size_t argc = 0, max = 1 + 3 * cfg->n_wrap_files + cfg->wrap_argc + 8 + 3;
	argv = calloc(max, sizeof *argv);
	num = calloc(4 + cfg->n_wrap_files, sizeof *num);
	if (!argv || !num) {
		lb_fail(err, ENOMEM, "out of memory");
		goto fail;
	}
	argv[argc++] = (char *)cfg->wrap_argv[0];
	for (size_t i = 0; i < cfg->n_wrap_files; i++) {
		const lb_wrap_file *f = &cfg->wrap_files[i];
		int fd = data_fd("llmbox-file", f->data, f->len);
		if (fd < 0) {
			lb_fail_sys(err, errno, "a memfd for %s", f->path);
			goto fail;
		}
		pass[n_pass++] = fd;
		snprintf(num[4 + i], sizeof num[0], "%d", fd);
		argv[argc++] = "--ro-bind-data";
		argv[argc++] = num[4 + i];
		argv[argc++] = (char *)f->path;
	}
	for (size_t i = 1; i < cfg->wrap_argc; i++)
		argv[argc++] = (char *)cfg->wrap_argv[i];
	static const char *const opts[] = {"--seccomp", "--info-fd", "--block-fd"};
	const int fds[] = {seccomp, info[1], block[0]};
	for (size_t i = 0; i < 3; i++) {
		snprintf(num[i], sizeof num[0], "%d", fds[i]);
		argv[argc++] = (char *)opts[i];
		argv[argc++] = num[i];
	}
	snprintf(num[3], sizeof num[0], "/proc/self/fd/%d", done);
	argv[argc++] = "--";
	argv[argc++] = num[3];
	argv[argc] = NULL;

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		lb_fail_sys(err, errno, "fork");
		goto fail;
	}
	if (pid == 0)
		exec_bwrap(argv, ep[1], pass, (size_t)n_pass, j, parent);
	t->pid = pid;
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	t->info = info[0];
	t->block = block[1];
	t->errfd = ep[0];
	fcntl(t->info, F_SETFL, O_NONBLOCK);
	fcntl(t->errfd, F_SETFL, O_NONBLOCK);
	close(ep[1]);
	for (int i = 0; i < n_pass; i++)
		close(pass[i]);
	free(argv);
	free(num);
	*out = t;
	return 0;
fail:
	for (int i = 0; i < n_pass; i++)
		close(pass[i]);
	if (info[0] >= 0)
		close(info[0]);
	if (block[1] >= 0)
		close(block[1]);
	for (int i = 0; i < 2; i++)
		if (ep[i] >= 0)
			close(ep[i]);
	free(argv);
	free(num);
	task_free(t);
	return -1;
}

static int bwrap_reset_start(void *s, void **out, lb_error *err)
{
	bwrap_task *t = calloc(1, sizeof *t);
	if (!t)
		return lb_fail(err, ENOMEM, "out of memory");
	t->pidfd = t->info = t->block = t->errfd = -1;
	t->pid = -1;
	if (lb_native_reset_start(s, &t->reset, err) < 0) {
		free(t);
		return -1;
	}
	*out = t;
	return 0;
}

static int bwrap_task_fds(void *tp, struct pollfd *pf, int max, int *timeout_ms)
{
	bwrap_task *t = tp;
	if (t->reset)
		return lb_native_task_fds(t->reset, pf, max, timeout_ms);
	int fd = t->state == BW_WAIT_PID ? t->info : t->state == BW_WAIT_EXIT ? t->pidfd : -1;
	*timeout_ms = fd < 0 ? 0 : -1;
	if (fd < 0 || max < 1)
		return 0;
	pf[0] = (struct pollfd){.fd = fd, .events = POLLIN};
	return 1;
}

static int bwrap_task_step(void *tp, int wait_ms)
{
	bwrap_task *t = tp;
	return t->reset ? lb_native_task_step(t->reset, wait_ms) : open_step(t, wait_ms);
}

static int bwrap_task_end(void *tp, void **session, lb_error *err)
{
	bwrap_task *t = tp;
	if (t->reset) {
		int rc = lb_native_task_end(t->reset, session, err);
		free(t);
		return rc;
	}
	while (!open_step(t, -1))
		;
	if (t->failed) {
		*err = t->err;
		task_free(t);
		return -1;
	}
	void *s = session ? lb_native_session_new(t->jail, t->filter) : NULL;
	if (!s) {
		task_free(t);
		return session ? lb_fail(err, ENOMEM, "out of memory") : 0;
	}
	t->jail = NULL;
	t->filter = NULL;
	task_free(t);
	*session = s;
	return 0;
}

static void bwrap_task_discard(void *tp)
{
	bwrap_task *t = tp;
	if (!t)
		return;
	if (t->reset) {
		lb_native_task_discard(t->reset);
		free(t);
		return;
	}
	/* collected later by lb_reap, never waited for here */
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		lb_bury_pid(t->pid);
		t->pid = -1;
	}
	task_free(t);
}

static void *bwrap_open(const lb_open_config *cfg, lb_error *err)
{
	void *t, *session = NULL;
	if (bwrap_open_start(cfg, &t, err) < 0 || bwrap_task_end(t, &session, err) < 0)
		return NULL;
	return session;
}

static int bwrap_reset(void *s, lb_error *err)
{
	void *t;
	return bwrap_reset_start(s, &t, err) < 0 ? -1 : bwrap_task_end(t, NULL, err);
}

const lb_backend lb_backend_bubblewrap = {
	.name = "bubblewrap",
	.caps = LB_CAP_POOL | LB_CAP_PERSISTENT_WORKSPACE | LB_CAP_NETWORK_POLICY | LB_CAP_SECCOMP |
		LB_CAP_INTERACTIVE | LB_CAP_ROOTFS,
	.open = bwrap_open,
	.run = lb_native_run,
	.copy_in = lb_native_copy_in,
	.copy_out = lb_native_copy_out,
	.collect = lb_native_collect,
	.close = lb_native_close,
	.prestart = lb_native_prestart,
	.pending_wait = lb_native_pending_wait,
	.pending_finish = lb_native_pending_finish,
	.pending_abandon = lb_native_pending_abandon,
	.reset = bwrap_reset,
	.pending_discard = lb_native_pending_discard,
	.start = lb_native_start,
	.pending_start = lb_native_pending_start,
	.run_fds = lb_active_op_fds,
	.run_step = lb_active_op_step,
	.run_abort = lb_active_op_abort,
	.run_end = lb_active_op_end,
	.run_discard = lb_active_op_discard,
	.open_start = bwrap_open_start,
	.reset_start = bwrap_reset_start,
	.task_fds = bwrap_task_fds,
	.task_step = bwrap_task_step,
	.task_end = bwrap_task_end,
	.task_discard = bwrap_task_discard,
};
