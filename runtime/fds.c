/* File descriptors: what sessions and runs hold in the caller, and a reserve that sessions may
 * not take. Without it, a process that opens sessions until it runs out of descriptors is left
 * with sessions in which every run fails ("Too many open files" from a pipe or a cgroup file);
 * with it, opening one more session is refused with the numbers, and the open ones keep working.
 *
 * This never changes the process's limits: the llmbox CLI raises its own soft limit at start
 * (main.c), but the library may be loaded into someone else's process (LuaJIT, nginx). */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Descriptors open below `limit` (the ones that count against RLIMIT_NOFILE), or -1 when /proc
 * cannot tell; `limit` when not even one more can be opened. */
static long count_open_fds(rlim_t limit)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return errno == EMFILE || errno == ENFILE ? (long)limit : -1;
	long n = 0;
	int own = dirfd(d);
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end == '\0' && end != e->d_name && fd != own && (rlim_t)fd < limit)
			n++;
	}
	closedir(d);
	return n;
}

int lb_fd_check(unsigned holds, const char *what, lb_error *err)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	long open_fds = count_open_fds(rl.rlim_cur);
	if (open_fds < 0)
		return 0; /* no /proc to count with: the kernel's EMFILE is the only check left */
	if ((rlim_t)open_fds + holds + LB_FDS_RESERVE <= rl.rlim_cur)
		return 0;
	char hard[32];
	if (rl.rlim_max == RLIM_INFINITY)
		snprintf(hard, sizeof hard, "unlimited");
	else
		snprintf(hard, sizeof hard, "%llu", (unsigned long long)rl.rlim_max);
	return lb_fail(err, EMFILE,
		       "cannot %s: this process has %ld file descriptors open and may have %llu "
		       "(ulimit -n; the hard limit is %s); each session holds %d, a prestarted run "
		       "%d, and %d stay free so that the runs of the sessions already open keep "
		       "working. Raise the limit (ulimit -n, LimitNOFILE= for a systemd service, "
		       "worker_rlimit_nofile in nginx) or close sessions",
		       what, open_fds, (unsigned long long)rl.rlim_cur, hard, LB_FDS_SESSION,
		       LB_FDS_PENDING, LB_FDS_RESERVE);
}
