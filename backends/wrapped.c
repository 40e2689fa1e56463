/* Jails that another sandbox program builds: the bubblewrap and nsjail backends. llmbox runs in
 * them as in its own.
 *
 * Opening a session runs the tool with what llmbox.backends.bubblewrap / .nsjail made from the
 * policy (new user, mount, pid, net, ipc, uts and cgroup namespaces; a tmpfs root holding only
 * the policy's read-only paths; size-limited tmpfs workspace, /tmp and /dev/shm; a minimal /dev;
 * /proc; /etc's files; the root read-only), as the host uid the sandbox user maps to (nobody
 * when llmbox runs as root, never host root), so the jail is that user's, as a native one is.
 * The program the tool starts in the jail is llmbox's jail-ready (jail_ready.c), exec'd through
 * /proc/self/fd so nothing of llmbox's is placed in the jail. llmbox then takes the jail's
 * namespaces (checked: their types, and that the user namespace is owned by that uid), in one of
 * two ways:
 *
 * - bwrap (handshake "bwrap"): it names the jail's first process on --info-fd; that process
 *   waits on --block-fd once every mount is in place while llmbox opens its namespaces (it
 *   cannot exit before it is let go, so the pid names it), then starts jail-ready, which exits 0.
 *   This driver adds the fds to bwrap's command line: /etc's files as memfds (--ro-bind-data),
 *   the policy's seccomp program (--seccomp), the info and block pipes, the program.
 * - nsjail (handshake "socket"), which cannot say which process is the jail's: jail-ready sends
 *   the namespaces over a unix socket and exits. The tool gets fixed fds: 3 its configuration
 *   (a memfd), 4 jail-ready, 5 the socket; what llmbox made refers to them by number.
 *
 * Either way the tool's exit status 0 is the proof that the jail was built completely, and only
 * then is the session handed out. The tool does not stay: the jail lives on as the namespaces,
 * and from then on the session is a native one (lb_native_*): every run, copy and emptying done
 * by the core entering them, each run in new pid and ipc namespaces with the policy's seccomp
 * filter, no capabilities and the policy's limits. No user code runs in the jail before that.
 *
 * Opening is a task an event loop drives: the info pipe or the socket until the namespaces (or
 * its end, when the tool failed) arrive, then a pidfd of the tool until it has exited; the
 * tool's stderr is the error. */
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
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { W_WAIT_NS, W_WAIT_EXIT, W_OVER };

typedef struct wrap_task {
	void *reset;	  /* an emptying (native's task), or NULL for an opening */
	const char *tool; /* "bwrap" or "nsjail", for errors */
	bool socket;	  /* handshake "socket": the namespaces come over `ns` */
	int state;
	pid_t pid;
	int pidfd, ns, block, errfd; /* ns: bwrap's info pipe, or the socket */
	char said[256];		     /* what came on bwrap's info fd */
	size_t said_len;
	lb_jail *jail; /* filled from the jail's namespaces */
	lb_filter *filter;
	bool failed;
	lb_error err;
} wrap_task;

static void task_free(wrap_task *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	lb_close_fd(&t->pidfd);
	lb_close_fd(&t->ns);
	lb_close_fd(&t->block);
	lb_close_fd(&t->errfd);
	lb_jail_close(t->jail);
	lb_filter_free(t->filter);
	free(t);
}

/* What bwrap said on stderr, one line, for an error message. */
static void read_stderr(wrap_task *t, char *buf, size_t len)
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

/* Checks the namespaces taken into t->jail; false (and t->err) when they are not all there and
 * right: the user namespace must be the one made as the sandbox user's host uid. */
static bool check_namespaces(wrap_task *t, const char *whose)
{
	lb_jail *j = t->jail;
	uid_t owner;
	bool ok = j->userns >= 0 && j->mntns >= 0 && j->netns >= 0 && j->utsns >= 0 &&
		  j->cgroupns != -2 && ioctl(j->userns, NS_GET_OWNER_UID, &owner) == 0 &&
		  owner == j->host_uid;
	if (j->cgroupns == -2)
		j->cgroupns = -1;
	if (!ok) {
		t->failed = true;
		lb_fail(&t->err, EPROTO, "the namespaces of %s's sandbox (%s) could not be taken",
			t->tool, whose);
	}
	return ok;
}

/* bwrap: takes the namespaces of the jail's first process, named on the info fd, and lets it go
 * on; false (and t->err) when there is none or they are not right. */
static bool take_namespaces(wrap_task *t)
{
	t->said[t->said_len] = '\0';
	const char *at = strstr(t->said, "\"child-pid\":");
	long pid = at ? strtol(at + strlen("\"child-pid\":"), NULL, 10) : 0;
	if (pid <= 0) {
		/* bwrap failed before it made the jail, and says why on stderr once it has exited
		 */
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
	if (!check_namespaces(t, "its first process"))
		return false;
	char go = 'g';
	if (write(t->block, &go, 1) != 1) {
		t->failed = true;
		lb_fail_sys(&t->err, errno, "letting the bubblewrap sandbox go on");
		return false;
	}
	return true;
}

/* The socket handshake: receives jail-ready's namespaces (jail_ready.c has the message). */
static bool receive_namespaces(wrap_task *t)
{
	enum { N = 5 };
	static const int types[N] = {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUTS,
				     CLONE_NEWCGROUP};
	char data[16] = "";
	union {
		char buf[CMSG_SPACE(N * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = data, .iov_len = sizeof data - 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof u.buf};
	ssize_t n;
	while ((n = recvmsg(t->ns, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	int fds[N], nfds = 0;
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (nfds > N)
			nfds = N;
		memcpy(fds, CMSG_DATA(c), (size_t)nfds * sizeof(int));
	}
	if (n <= 0) {
		/* no message: the tool failed, and says why on stderr once it has exited */
		t->failed = true;
		lb_fail(&t->err, EIO, "%s could not build the sandbox", t->tool);
		return false;
	}
	int got[N] = {-1, -1, -1, -1, -1}, used = 0;
	bool ok = !(msg.msg_flags & MSG_CTRUNC) && n == 2 + N && !memcmp(data, "ns", 2);
	for (int i = 0; ok && i < N; i++) {
		if (data[2 + i] != 'y')
			continue;
		if (used >= nfds || ioctl(fds[used], NS_GET_NSTYPE) != types[i])
			ok = false;
		else
			got[i] = fds[used++];
	}
	if (!ok || used != nfds) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		t->failed = true;
		lb_fail(&t->err, EPROTO, "%s's sandbox did not send its namespaces as expected",
			t->tool);
		return false;
	}
	lb_jail *j = t->jail;
	j->userns = got[0];
	j->mntns = got[1];
	j->netns = got[2];
	j->utsns = got[3];
	j->cgroupns = got[4];
	return check_namespaces(t, "what it sent");
}

/* One step of an opening; 1 when it is over. */
static int open_step(wrap_task *t, int wait_ms)
{
	if (t->state == W_OVER)
		return 1;
	struct pollfd pf = {.fd = t->state == W_WAIT_NS ? t->ns : t->pidfd, .events = POLLIN};
	if (pf.fd >= 0 && wait_ms != 0) {
		int r = poll(&pf, 1, wait_ms);
		if (r <= 0)
			return 0;
	} else if (pf.fd >= 0 && poll(&pf, 1, 0) <= 0) {
		return 0;
	}
	if (t->state == W_WAIT_NS && t->socket) {
		receive_namespaces(t);
		lb_close_fd(&t->ns);
		t->state = W_WAIT_EXIT;
		return 0;
	}
	if (t->state == W_WAIT_NS) {
		ssize_t n;
		while ((n = read(t->ns, t->said + t->said_len, sizeof t->said - 1 - t->said_len)) <
			       0 &&
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
		lb_close_fd(&t->ns);
		lb_close_fd(&t->block); /* (bwrap's first process also goes on when it ends) */
		t->state = W_WAIT_EXIT;
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
			lb_fail(&t->err, EIO, "%s could not build the sandbox", t->tool);
		t->failed = true;
		size_t len = strlen(t->err.msg);
		snprintf(t->err.msg + len, sizeof t->err.msg - len, " (%s: %s%s%s)", t->tool, why,
			 said[0] ? ": " : "", said);
	}
	t->state = W_OVER;
	return 1;
}

/* The child that becomes the tool: stdin and stdout /dev/null, stderr the error pipe, the listed
 * fds open across exec (with `fixed`, moved to 3, 4, 5... in order), running as the sandbox
 * user's host uid. Never returns. */
static void exec_tool(char **argv, int errfd, const int *pass, size_t n_pass, bool fixed,
		      const lb_jail *j, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	int null = open("/dev/null", O_RDWR);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(127);
	int keep[32];
	size_t n = 0;
	for (size_t i = 0; i < n_pass && n < sizeof keep / sizeof keep[0]; i++) {
		/* (above every target first, so no move overwrites an fd still to move) */
		int fd = fixed ? fcntl(pass[i], F_DUPFD, 64) : pass[i];
		int fl = fd < 0 ? -1 : fcntl(fd, F_GETFD);
		if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
			_exit(127);
		keep[n++] = fd;
	}
	for (size_t i = 0; fixed && i < n; i++) {
		if (dup2(keep[i], 3 + (int)i) < 0)
			_exit(127);
		keep[i] = 3 + (int)i;
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

/* A new opening task for `tool`, its jail still empty, the policy's filter compiled (a policy
 * error is reported before any namespace is made); NULL with err filled. */
static wrap_task *task_new(const lb_open_config *cfg, const char *tool, bool socket, lb_error *err)
{
	if (!cfg->wrap_argv || cfg->wrap_argc < 1 || !cfg->wrap_ready) {
		lb_fail(err, EINVAL, "%s: the open config has no command line", tool);
		return NULL;
	}
	bool root = geteuid() == 0;
	uid_t host_uid = root ? cfg->jail.host_uid : geteuid();
	if (root && host_uid == 0) {
		lb_fail(err, EINVAL,
			"refusing to map the sandbox user to host root (host_uid = 0)");
		return NULL;
	}
	if (lb_fd_check(LB_FDS_SESSION, "open another sandbox session", err) < 0)
		return NULL;
	wrap_task *t = calloc(1, sizeof *t);
	lb_jail *j = calloc(1, sizeof *j);
	if (!t || !j) {
		free(t);
		free(j);
		lb_fail(err, ENOMEM, "out of memory");
		return NULL;
	}
	t->tool = tool;
	t->socket = socket;
	t->pid = -1;
	t->pidfd = t->ns = t->block = t->errfd = -1;
	t->jail = j;
	j->userns = j->mntns = j->netns = j->utsns = j->cgroupns = -1;
	j->host_uid = host_uid;
	j->host_gid = root ? cfg->jail.host_gid : getegid();
	if (!(t->filter = lb_filter_build(&cfg->syscalls, err))) {
		task_free(t);
		return NULL;
	}
	return t;
}

/* Starts the tool for t (argv NULL-terminated; pass: the fds it gets, closed here either way);
 * -1 with err filled. */
static int start_tool(wrap_task *t, char **argv, int *pass, int n_pass, bool fixed, lb_error *err)
{
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		lb_fail_sys(err, errno, "pipe2");
		goto out;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		lb_fail_sys(err, errno, "fork");
		close(ep[0]);
		close(ep[1]);
		goto out;
	}
	if (pid == 0)
		exec_tool(argv, ep[1], pass, (size_t)n_pass, fixed, t->jail, parent);
	t->pid = pid;
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	t->errfd = ep[0];
	fcntl(t->errfd, F_SETFL, O_NONBLOCK);
	fcntl(t->ns, F_SETFL, O_NONBLOCK);
	close(ep[1]);
out:
	for (int i = 0; i < n_pass; i++)
		close(pass[i]);
	return t->pid > 0 ? 0 : -1;
}

static int bwrap_open_start(const lb_open_config *cfg, void **out, lb_error *err)
{
	if (cfg->n_wrap_files > 16)
		return lb_fail(err, E2BIG, "bubblewrap: at most 16 files are placed in a jail");
	wrap_task *t = task_new(cfg, "bwrap", false, err);
	if (!t)
		return -1;
	/* fds bwrap gets: the seccomp program, the program to start, the info and block pipes'
	 * ends, the files */
	int pass[4 + 16], n_pass = 0, info[2] = {-1, -1}, block[2] = {-1, -1};
	char **argv = NULL;
	char(*num)[32] = NULL;
	int seccomp = lb_filter_memfd(t->filter, err);
	if (seccomp < 0)
		goto fail;
	pass[n_pass++] = seccomp;
	int ready = open(cfg->wrap_ready, O_RDONLY | O_CLOEXEC);
	if (ready < 0) {
		lb_fail_sys(err, errno, "opening %s (make builds it)", cfg->wrap_ready);
		goto fail;
	}
	pass[n_pass++] = ready;
	if (pipe2(info, O_CLOEXEC) < 0 || pipe2(block, O_CLOEXEC) < 0) {
		lb_fail_sys(err, errno, "pipe2");
		goto fail;
	}
	pass[n_pass++] = info[1];
	pass[n_pass++] = block[0];
	t->ns = info[0];
	t->block = block[1];
	/* bwrap, the files, the policy's part, 3 options with a number each, --, the program */
	size_t argc = 0, max = 1 + 3 * cfg->n_wrap_files + cfg->wrap_argc + 6 + 3;
	argv = calloc(max, sizeof *argv);
	num = calloc(4 + cfg->n_wrap_files, sizeof *num);
	if (!argv || !num) {
		lb_fail(err, ENOMEM, "out of memory");
		goto fail;
	}
	argv[argc++] = (char *)cfg->wrap_argv[0];
	for (size_t i = 0; i < cfg->n_wrap_files; i++) {
		const lb_file *f = &cfg->wrap_files[i];
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
	snprintf(num[3], sizeof num[0], "/proc/self/fd/%d", ready);
	argv[argc++] = "--";
	argv[argc++] = num[3];
	argv[argc] = NULL;
	int rc = start_tool(t, argv, pass, n_pass, false, err);
	n_pass = 0;
	free(argv);
	free(num);
	if (rc < 0) {
		task_free(t);
		return -1;
	}
	*out = t;
	return 0;
fail:
	for (int i = 0; i < n_pass; i++)
		close(pass[i]);
	/* pipes made but not yet handed to the task and the fds bwrap gets */
	for (int i = 0; i < 2 && t->ns < 0 && info[0] >= 0; i++)
		close(info[i]);
	for (int i = 0; i < 2 && t->block < 0 && block[0] >= 0; i++)
		close(block[i]);
	free(argv);
	free(num);
	task_free(t);
	return -1;
}

static int nsjail_open_start(const lb_open_config *cfg, void **out, lb_error *err)
{
	if (!cfg->wrap_config)
		return lb_fail(err, EINVAL, "nsjail: the open config has no nsjail configuration");
	wrap_task *t = task_new(cfg, "nsjail", true, err);
	if (!t)
		return -1;
	/* fds nsjail gets, as 3, 4 and 5: its configuration, jail-ready, the socket */
	int pass[3], n_pass = 0, sv[2] = {-1, -1};
	char **argv = NULL;
	if ((pass[n_pass] = data_fd("llmbox-nsjail.cfg", cfg->wrap_config, cfg->wrap_config_len)) <
	    0) {
		lb_fail_sys(err, errno, "a memfd for nsjail's configuration");
		goto fail;
	}
	n_pass++;
	if ((pass[n_pass] = open(cfg->wrap_ready, O_RDONLY | O_CLOEXEC)) < 0) {
		lb_fail_sys(err, errno, "opening %s (make builds it)", cfg->wrap_ready);
		goto fail;
	}
	n_pass++;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		lb_fail_sys(err, errno, "socketpair");
		goto fail;
	}
	pass[n_pass++] = sv[1];
	t->ns = sv[0];
	if (!(argv = calloc(cfg->wrap_argc + 1, sizeof *argv))) {
		lb_fail(err, ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < cfg->wrap_argc; i++)
		argv[i] = (char *)cfg->wrap_argv[i];
	int rc = start_tool(t, argv, pass, n_pass, true, err);
	free(argv);
	if (rc < 0) {
		task_free(t);
		return -1;
	}
	*out = t;
	return 0;
fail:
	for (int i = 0; i < n_pass; i++)
		close(pass[i]);
	task_free(t);
	return -1;
}

static int wrap_reset_start(void *s, void **out, lb_error *err)
{
	wrap_task *t = calloc(1, sizeof *t);
	if (!t)
		return lb_fail(err, ENOMEM, "out of memory");
	t->pidfd = t->ns = t->block = t->errfd = -1;
	t->pid = -1;
	if (lb_native_reset_start(s, &t->reset, err) < 0) {
		free(t);
		return -1;
	}
	*out = t;
	return 0;
}

static int wrap_task_fds(void *tp, struct pollfd *pf, int max, int *timeout_ms)
{
	wrap_task *t = tp;
	if (t->reset)
		return lb_native_task_fds(t->reset, pf, max, timeout_ms);
	int fd = t->state == W_WAIT_NS ? t->ns : t->state == W_WAIT_EXIT ? t->pidfd : -1;
	*timeout_ms = fd < 0 ? 0 : -1;
	if (fd < 0 || max < 1)
		return 0;
	pf[0] = (struct pollfd){.fd = fd, .events = POLLIN};
	return 1;
}

static int wrap_task_step(void *tp, int wait_ms)
{
	wrap_task *t = tp;
	return t->reset ? lb_native_task_step(t->reset, wait_ms) : open_step(t, wait_ms);
}

static int wrap_task_end(void *tp, void **session, lb_error *err)
{
	wrap_task *t = tp;
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

static void wrap_task_discard(void *tp)
{
	wrap_task *t = tp;
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

static void *open_blocking(int (*start)(const lb_open_config *, void **, lb_error *),
			   const lb_open_config *cfg, lb_error *err)
{
	void *t, *session = NULL;
	if (start(cfg, &t, err) < 0 || wrap_task_end(t, &session, err) < 0)
		return NULL;
	return session;
}

static void *bwrap_open(const lb_open_config *cfg, lb_error *err)
{
	return open_blocking(bwrap_open_start, cfg, err);
}

static void *nsjail_open(const lb_open_config *cfg, lb_error *err)
{
	return open_blocking(nsjail_open_start, cfg, err);
}

static int wrap_reset(void *s, lb_error *err)
{
	void *t;
	return wrap_reset_start(s, &t, err) < 0 ? -1 : wrap_task_end(t, NULL, err);
}

/* Everything but opening is a native session's. */
#define WRAPPED_BACKEND(NAME, OPEN, OPEN_START)                                                    \
	{                                                                                          \
		.name = NAME,                                                                      \
		.caps = LB_CAP_POOL | LB_CAP_PERSISTENT_WORKSPACE | LB_CAP_NETWORK_POLICY |        \
			LB_CAP_SECCOMP | LB_CAP_INTERACTIVE | LB_CAP_ROOTFS | LB_CAP_RUN_LIMITS |  \
			EGRESS_CAP,                                                                \
		.open = OPEN, .run = lb_native_run, .copy_in = lb_native_copy_in,                  \
		.copy_out = lb_native_copy_out, .collect = lb_native_collect,                      \
		.close = lb_native_close, .prestart = lb_native_prestart,                          \
		.pending_wait = lb_native_pending_wait,                                            \
		.pending_finish = lb_native_pending_finish,                                        \
		.pending_abandon = lb_native_pending_abandon, .reset = wrap_reset,                 \
		.pending_discard = lb_native_pending_discard, .start = lb_native_start,            \
		.pending_start = lb_native_pending_start, .run_fds = lb_active_op_fds,             \
		.run_step = lb_active_op_step, .run_abort = lb_active_op_abort,                    \
		.run_end = lb_active_op_end, .run_discard = lb_active_op_discard,                  \
		.open_start = OPEN_START, .reset_start = wrap_reset_start,                         \
		.task_fds = wrap_task_fds, .task_step = wrap_task_step, .task_end = wrap_task_end, \
		.task_discard = wrap_task_discard, .egress = EGRESS_OP,                            \
		.egress_denied = EGRESS_DENIED_OP,                                                 \
	}

/* bwrap's jails get egress as native's do (runtime/egress.c joins the jail's user namespace);
 * nsjail's not yet (untested: no nsjail here) */
#define EGRESS_CAP	 LB_CAP_EGRESS
#define EGRESS_OP	 lb_native_egress
#define EGRESS_DENIED_OP lb_native_egress_denied
const lb_backend lb_backend_bubblewrap =
	WRAPPED_BACKEND("bubblewrap", bwrap_open, bwrap_open_start);
#undef EGRESS_CAP
#undef EGRESS_OP
#undef EGRESS_DENIED_OP
#define EGRESS_CAP	 0
#define EGRESS_OP	 NULL
#define EGRESS_DENIED_OP NULL
const lb_backend lb_backend_nsjail = WRAPPED_BACKEND("nsjail", nsjail_open, nsjail_open_start);
