/* container-exec: llmbox's helper inside docker and podman containers (placed at open in the
 * container's root-only tmpfs, see lua/llmbox/backends/engines.lua). The run's wrapper is
 * root's, with only CAP_KILL, CAP_SETUID and CAP_SETGID; this helper runs a command as the
 * sandbox user and, for the program itself, reports what the engine cannot: the peak memory
 * and CPU time of that one process tree.
 *
 *   container-exec [--report FD] -- ARGV...
 *   container-exec --keep PIDS_EVENTS
 *
 * The child drops to uid/gid 1000 with no supplementary groups and no capabilities (inheritable
 * ones included), then executes ARGV. The helper stays root's, so the program cannot signal it,
 * waits for the child and writes "MAXRSS_KB UTIME_US STIME_US\n" to FD (not inherited by the
 * child). Its exit status is the child's, 128 + the signal's number when a signal ended it, as a
 * shell reports it; 126 when the drop or the exec failed (said on stderr).
 *
 * --keep: the container's keeper (container.KEEPER execs it in its place once the helper is
 * there). Root's, with CAP_KILL: on SIGUSR1 (a kill request the engine's init passes on) or a
 * new refused fork in the pids cgroup's events file, looked at five times a second, it kills
 * every process but init and itself. Unlike a shell's, its wait needs no process: a fork bomb
 * that fills the pids ceiling cannot stop it.
 *
 * Static, with no dependency: it runs in images llmbox knows nothing of (busybox's included). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOX_ID 1000

static int drop_privileges(void)
{
	if (setgroups(0, NULL) != 0 || setresgid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID) != 0 ||
	    setresuid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID) != 0)
		return -1;
	/* Leaving uid 0 clears the permitted, effective and ambient sets; inheritable ones would
	 * survive, so they go too. */
	struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &head, data) != 0)
		return -1;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static volatile sig_atomic_t kill_requested;

static void on_kill_request(int sig)
{
	(void)sig;
	kill_requested = 1;
}

/* The "max N" count of the pids cgroup's events file: forks it refused; -1 when unreadable. */
static long refused_forks(const char *events)
{
	char buf[256];
	int fd = open(events, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *at = strstr(buf, "max ");
	return at ? strtol(at + 4, NULL, 10) : -1;
}

/* kill(-1) reaches every process it may signal but init and itself, all at once: rounds until
 * none is left (ESRCH), or 100 of them. */
static void sweep(void)
{
	for (int i = 0; i < 100; i++)
		if (kill(-1, SIGKILL) != 0 && errno == ESRCH)
			break;
}

static int keep(const char *events)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_kill_request; /* no SA_RESTART: the wait ends at once */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return 126;
	signal(SIGCHLD, SIG_IGN); /* what the shell it replaced left is reaped by the kernel */
	long seen = refused_forks(events);
	for (;;) {
		struct timespec tick = {0, 200 * 1000 * 1000};
		nanosleep(&tick, NULL);
		long now = refused_forks(events);
		if (kill_requested || now != seen) {
			kill_requested = 0;
			sweep();
			/* forks refused while it killed are not a new event */
			seen = refused_forks(events);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--keep") == 0)
		return keep(argv[2]);
	int report = -1, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--report") == 0 && i + 1 < argc) {
			char *end;
			long fd = strtol(argv[++i], &end, 10);
			if (*end != '\0' || fd < 3 || fd > 1023) {
				fprintf(stderr, "container-exec: --report: expected a descriptor "
						"above 2\n");
				return 126;
			}
			report = (int)fd;
		} else {
			fprintf(stderr, "usage: container-exec [--report FD] -- ARGV...\n");
			return 126;
		}
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "usage: container-exec [--report FD] -- ARGV...\n");
		return 126;
	}
	char **cmd = argv + i + 1;
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "container-exec: fork: %s\n", strerror(errno));
		return 126;
	}
	if (pid == 0) {
		if (report >= 0)
			close(report);
		if (drop_privileges() != 0) {
			fprintf(stderr, "container-exec: dropping to the sandbox user: %s\n",
				strerror(errno));
			_exit(126);
		}
		execvp(cmd[0], cmd);
		int err = errno;
		fprintf(stderr, "container-exec: %s: %s\n", cmd[0], strerror(err));
		_exit(err == ENOENT ? 127 : 126);
	}
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "container-exec: wait: %s\n", strerror(errno));
			return 126;
		}
	}
	if (report >= 0) {
		char line[96];
		int n = snprintf(line, sizeof line, "%ld %lld %lld\n", ru.ru_maxrss,
				 (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
				 (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec);
		if (write(report, line, (size_t)n) != n)
			fprintf(stderr, "container-exec: writing the report: %s\n",
				strerror(errno));
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
