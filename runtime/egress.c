/* Egress (issue 18): a network namespace for a jail's runs with outbound-only user-mode
 * networking and an nftables ruleset that decides where it may go.
 *
 *   caller ── H: joins the jail's user namespace, makes a network namespace (its loopback up),
 *   │          loads the ruleset in it, reports, and waits until the caller has opened it;
 *   └──────── pasta (Debian's passt): joins that namespace (given as descriptors), gives it an
 *              interface with the host's address and routes, and turns its connections into
 *              the host's sockets; started
 *              with no port forwarded either way and the gateway not mapped to the host's
 *              loopback. It stays in the foreground, the caller's child with a parent-death
 *              signal: it holds the namespace, so a caller killed without closing the session
 *              must not leave it running. Its pid file says the namespace is configured.
 *
 * The namespace belongs to the jail's user namespace: the jail's programs, which have no
 * capabilities there, can neither change the ruleset nor leave the namespace. pasta's sockets
 * are the host's, so the ruleset is what keeps the host's own addresses and private ranges out of
 * reach (llmbox.egress writes it). libnftables is loaded with dlopen, in the children only:
 * callers that never ask for egress never load it. */
#define _GNU_SOURCE
#include "internal.h"
#include "run.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct lb_egress {
	int netns;   /* the namespace, held */
	pid_t pasta; /* our child, until lb_egress_close reaps it */
};

/* libnftables, loaded in a child. */
struct nft_api {
	struct nft_ctx *(*ctx_new)(uint32_t);
	int (*buffer_output)(struct nft_ctx *);
	const char *(*get_output)(struct nft_ctx *);
	int (*buffer_error)(struct nft_ctx *);
	const char *(*get_error)(struct nft_ctx *);
	void (*set_flags)(struct nft_ctx *, unsigned int);
	int (*run)(struct nft_ctx *, const char *);
};

static void nft_load(int report, struct nft_api *api)
{
	void *h = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		lb_child_fail(report, 0,
			      "egress needs libnftables (Debian's package libnftables1): %s",
			      dlerror());
	*(void **)&api->ctx_new = dlsym(h, "nft_ctx_new");
	*(void **)&api->buffer_output = dlsym(h, "nft_ctx_buffer_output");
	*(void **)&api->get_output = dlsym(h, "nft_ctx_get_output_buffer");
	*(void **)&api->buffer_error = dlsym(h, "nft_ctx_buffer_error");
	*(void **)&api->get_error = dlsym(h, "nft_ctx_get_error_buffer");
	*(void **)&api->set_flags = dlsym(h, "nft_ctx_output_set_flags");
	*(void **)&api->run = dlsym(h, "nft_run_cmd_from_buffer");
	if (!api->ctx_new || !api->buffer_output || !api->get_output || !api->buffer_error ||
	    !api->get_error || !api->set_flags || !api->run)
		lb_child_fail(report, 0, "libnftables.so.1 lacks the functions egress uses");
}

/* Runs nft commands in the child's network namespace; their output (JSON when json) to out_fd. */
static void nft_run(int report, const char *cmds, bool json, int out_fd)
{
	struct nft_api api;
	nft_load(report, &api);
	struct nft_ctx *ctx = api.ctx_new(0);
	if (!ctx)
		lb_child_fail(report, ENOMEM, "nft_ctx_new");
	api.buffer_output(ctx);
	api.buffer_error(ctx);
	if (json)
		api.set_flags(ctx, NFT_CTX_OUTPUT_JSON);
	if (api.run(ctx, cmds) != 0)
		lb_child_fail(report, 0, "nftables refused the egress rules: %.400s",
			      api.get_error(ctx));
	const char *out = api.get_output(ctx);
	if (out_fd >= 0 && out && lb_write_all(out_fd, out, strlen(out)) < 0)
		lb_child_fail(report, errno, "writing nft's output");
}

static void loopback_up(int report)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		lb_child_fail(report, errno, "reading the egress namespace's loopback");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		lb_child_fail(report, errno, "bringing the egress namespace's loopback up");
	close(s);
}

/* In a forked child: the jail's user namespace, then netns (-1: a new one). */
static void enter(int report, const lb_jail *j, int netns)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (geteuid() == 0 && setgroups(0, NULL) < 0)
		lb_child_fail(report, errno, "setgroups");
	if (setns(j->userns, CLONE_NEWUSER) < 0)
		lb_child_fail(report, errno, "joining the jail's user namespace");
	if (netns >= 0 ? setns(netns, CLONE_NEWNET) : unshare(CLONE_NEWNET))
		lb_child_fail(report, errno, "%s the egress network namespace",
			      netns >= 0 ? "joining" : "creating");
}

static char *read_file_text(const char *path, char *buf, size_t len)
{
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return buf;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* What pasta said: its log, else what it wrote before opening it, without its complaints that
 * it has no syslog. */
static const char *pasta_said(const char *logfile, const char *errfile, char *buf, size_t len)
{
	char raw[2048];
	read_file_text(logfile, raw, sizeof raw);
	if (!raw[0])
		read_file_text(errfile, raw, sizeof raw);
	buf[0] = '\0';
	size_t n = 0;
	for (char *save = NULL, *line = strtok_r(raw, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strstr(line, "syslog"))
			continue;
		int w = snprintf(buf + n, len - n, "%s%s", n ? " " : "", line);
		if (w < 0 || (size_t)w >= len - n)
			break;
		n += (size_t)w;
	}
	return buf[0] ? buf : "(it said nothing)";
}

/* How long pasta may take to configure the namespace (it takes ~25 ms). */
#define PASTA_START_MS 10000

/* Ends pasta (our child) and reaps it: SIGTERM, then SIGKILL after 100 ms. */
static void stop_pasta(pid_t pasta)
{
	kill(pasta, SIGTERM);
	for (int i = 0; i < 50; i++) {
		pid_t r = waitpid(pasta, NULL, WNOHANG);
		if (r == pasta || (r < 0 && errno != EINTR))
			return;
		nanosleep(&(struct timespec){0, 2000000}, NULL);
	}
	kill(pasta, SIGKILL);
	while (waitpid(pasta, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Starts pasta on the namespaces (its own descriptors 3 and 4: opening another process's
 * /proc/PID/ns needs ptrace rights over it, which pasta may lack); returns its pid, once its pid
 * file says the namespace is configured. */
static pid_t start_pasta(int netns_fd, int userns_fd, const char *pasta, lb_error *err)
{
	char dir[] = "/tmp/llmbox-egress-XXXXXX";
	if (!mkdtemp(dir))
		return lb_fail_sys(err, errno, "making a directory for pasta's files");
	char pidfile[64], logfile[64], errfile[64];
	const char *netns = "/proc/self/fd/3", *userns = "/proc/self/fd/4";
	snprintf(pidfile, sizeof pidfile, "%s/pid", dir);
	snprintf(logfile, sizeof logfile, "%s/log", dir);
	snprintf(errfile, sizeof errfile, "%s/err", dir);
	/* No port forwarded in (-t, -u) nor to the host's loopback (-T, -U), the gateway not the
	 * host; no DHCP, NDP or router advertisements: the interface is configured by pasta. As
	 * root, pasta would switch to nobody, who may not enter the jail's user namespace. */
	const char *argv[] = {pasta,	     "-q",	     "-t",	  "none",	 "-u",
			      "none",	     "-T",	     "none",	  "-U",		 "none",
			      "--no-map-gw", "--config-net", "--no-dhcp", "--no-dhcpv6", "--no-ndp",
			      "--no-ra",     "-P",	     pidfile,	  "-l",		 logfile,
			      "--netns",     netns,	     "--userns",  userns,	 "-f",
			      NULL,	     NULL,	     NULL};
	if (geteuid() == 0) {
		size_t n = sizeof argv / sizeof argv[0] - 3;
		argv[n] = "--runas";
		argv[n + 1] = "0";
	}
	pid_t parent = getpid();
	pid_t p = fork();
	if (p < 0) {
		rmdir(dir);
		return lb_fail_sys(err, errno, "fork");
	}
	if (p == 0) {
		/* Gone with the caller. The signal survives the exec and pasta's joining the jail's
		 * user namespace, which the same user owns (the kernel clears it only on
		 * credentials that are no subset of the old ones). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		/* default dispositions and no blocked signal: this pasta takes an ignored SIGPIPE
		 * (inherited: callers often ignore it) for a failure to set its own */
		lb_reset_signals();
		/* what pasta says before its log is open goes to errfile */
		int null = open("/dev/null", O_RDWR),
		    out = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (null >= 0)
			dup2(null, 0);
		if (out >= 0) {
			dup2(out, 1);
			dup2(out, 2);
		}
		/* the namespaces at 3 and 4, kept across exec; the daemon lives as long as the
		 * session: none of the caller's other descriptors with it */
		int n = fcntl(netns_fd, F_DUPFD_CLOEXEC, 10),
		    u = fcntl(userns_fd, F_DUPFD_CLOEXEC, 10);
		if (n < 0 || u < 0 || dup2(n, 3) < 0 || dup2(u, 4) < 0)
			_exit(126);
		const int keep[] = {3, 4};
		lb_close_fds_except(keep, 2);
		execvp(pasta, (char *const *)argv);
		_exit(127);
	}
	/* Ready when its pid file has a pid; an exit before that is a failure. */
	char text[512];
	pid_t ready = 0, r = 0;
	int st = 0;
	for (double deadline = lb_now_ms() + PASTA_START_MS;;) {
		while ((r = waitpid(p, &st, WNOHANG)) < 0 && errno == EINTR)
			;
		if (r != 0 ||
		    (ready = (pid_t)atoi(read_file_text(pidfile, text, sizeof text))) > 0 ||
		    lb_now_ms() > deadline)
			break;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	if (r == p && WIFEXITED(st) && WEXITSTATUS(st) == 127 && access(pidfile, F_OK) < 0)
		lb_fail(err, ENOENT,
			"egress needs pasta (Debian's package passt): %s could not be started",
			pasta);
	else if (r == p)
		lb_fail(err, EIO, "pasta could not give the jail its network (exit %d): %s",
			WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
			pasta_said(logfile, errfile, text, sizeof text));
	else if (r < 0)
		lb_fail_sys(err, errno, "waiting for pasta");
	else if (ready <= 0)
		lb_fail(err, ETIMEDOUT,
			"pasta did not configure the jail's network within %d s: %s",
			PASTA_START_MS / 1000, pasta_said(logfile, errfile, text, sizeof text));
	if (r == 0 && ready <= 0)
		stop_pasta(p);
	unlink(pidfile);
	unlink(logfile);
	unlink(errfile);
	rmdir(dir);
	return r == 0 && ready > 0 ? p : -1;
}

lb_egress *lb_egress_open(const lb_jail *j, const char *ruleset, const char *pasta, lb_error *err)
{
	int report[2], hold[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return lb_fail_sys(err, errno, "pipe2"), NULL;
	if (pipe2(hold, O_CLOEXEC) < 0) {
		close(report[0]);
		close(report[1]);
		return lb_fail_sys(err, errno, "pipe2"), NULL;
	}
	pid_t h = fork();
	if (h == 0) {
		close(report[0]);
		close(hold[1]);
		enter(report[1], j, -1);
		loopback_up(report[1]);
		nft_run(report[1], ruleset, false, -1);
		lb_child_progress(report[1], 'r');
		char c;
		while (read(hold[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(report[1]);
	close(hold[0]);
	lb_egress *e = NULL;
	lb_error rep = {0};
	if (h < 0) {
		lb_fail_sys(err, errno, "fork");
	} else if (!lb_read_report(report[0], &rep)) {
		lb_fail(err, EIO, "the egress namespace's helper died");
	} else if (rep.code != LB_PROGRESS) {
		*err = rep;
	} else if (!(e = calloc(1, sizeof *e))) {
		lb_fail(err, ENOMEM, "out of memory");
	} else {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/ns/net", (int)h);
		if ((e->netns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			lb_fail_sys(err, errno, "opening the egress network namespace");
	}
	/* the helper's part is over (EOF on its pipe ends it): the namespace lives on in e->netns,
	 * which pasta gets as a descriptor */
	close(hold[1]);
	close(report[0]);
	if (h > 0)
		while (waitpid(h, NULL, 0) < 0 && errno == EINTR)
			;
	if (e && e->netns >= 0 &&
	    (e->pasta = start_pasta(e->netns, j->userns, pasta ? pasta : "pasta", err)) > 0)
		return e;
	if (e && e->netns >= 0)
		close(e->netns);
	free(e);
	return NULL;
}

int lb_egress_netns(const lb_egress *e)
{
	return e->netns;
}

int lb_egress_denied(const lb_egress *e, const lb_jail *j, char **out, lb_error *err)
{
	int report[2], pipe_out[2];
	*out = NULL;
	if (pipe2(report, O_CLOEXEC) < 0)
		return lb_fail_sys(err, errno, "pipe2");
	if (pipe2(pipe_out, O_CLOEXEC) < 0) {
		close(report[0]);
		close(report[1]);
		return lb_fail_sys(err, errno, "pipe2");
	}
	pid_t d = fork();
	if (d == 0) {
		close(report[0]);
		close(pipe_out[0]);
		enter(report[1], j, e->netns);
		/* each apart: nft 1.0.6 lists only the last of several sets in one batch, and a
		 * flush in the same batch comes first */
		nft_run(report[1], "list set inet llmbox denied", true, pipe_out[1]);
		nft_run(report[1], "list set inet llmbox denied6", true, pipe_out[1]);
		nft_run(report[1], "flush set inet llmbox denied\nflush set inet llmbox denied6\n",
			false, -1);
		_exit(0);
	}
	close(report[1]);
	close(pipe_out[1]);
	size_t len = 0, cap = 4096;
	char *buf = d > 0 ? malloc(cap) : NULL;
	ssize_t n = 0;
	while (buf) {
		if (len + 1 >= cap) {
			char *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
		n = read(pipe_out[0], buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(pipe_out[0]);
	lb_error rep = {0};
	int got = d > 0 ? lb_read_report(report[0], &rep) : 0;
	close(report[0]);
	int st = 0;
	if (d > 0)
		while (waitpid(d, &st, 0) < 0 && errno == EINTR)
			;
	if (d < 0 || !buf || got || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		free(buf);
		if (got)
			*err = rep;
		else if (d < 0)
			lb_fail_sys(err, errno, "fork");
		else
			lb_fail(err, EIO, "reading the egress refusals failed");
		return -1;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

void lb_egress_close(lb_egress *e)
{
	if (!e)
		return;
	if (e->pasta > 0)
		stop_pasta(e->pasta); /* our child: its pid stays ours until reaped */
	if (e->netns >= 0)
		close(e->netns);
	free(e);
}
