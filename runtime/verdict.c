/* The verdict on a finished run: how the program ended, which limit fired, how much CPU time
 * and memory it used. "The sandbox broke" (a setup failure) is an error, never a result. */
#define _GNU_SOURCE
#include "run.h"

#include <signal.h>
#include <sys/wait.h>

static double rusage_ms(const struct rusage *ru)
{
	return (double)ru->ru_utime.tv_sec * 1e3 + (double)ru->ru_utime.tv_usec / 1e3 +
	       (double)ru->ru_stime.tv_sec * 1e3 + (double)ru->ru_stime.tv_usec / 1e3;
}

/* Which limit ended a run the supervisor did not stop. Limits that the kernel enforces leave
 * their mark (a cgroup event, a signal), whatever the timing:
 *   - processes: any fork the pids limit refused during the run. A refused fork is how a process
 *     bomb shows first (memory running out is a consequence), and a program that survives one
 *     has still hit the limit: the supervisor stops such runs as soon as it sees the event, so
 *     the verdict must not depend on whether it looked before the run ended, or on the exit
 *     status the program chose;
 *   - memory: the memory cgroup killed a process;
 *   - cpu: SIGXCPU, or SIGKILL once the program's own CPU time reached the limit (RLIMIT_CPU's
 *     hard limit). The program's rusage, not the run's total, since the limit is per process;
 *   - file_size: SIGXFSZ, or 128 + SIGXFSZ, how a shell reports a child the limit killed. */
static enum lb_limit kernel_limit(const lb_limits *lim, const lb_result *res, double program_cpu_ms,
				  const lb_cgroup_usage *usage)
{
	if (usage->pids_refused && lim->processes)
		return LB_LIMIT_PROCESSES;
	if (usage->oom)
		return LB_LIMIT_MEMORY;
	if (res->signal == SIGXCPU ||
	    (res->signal == SIGKILL && lim->cpu > 0 && program_cpu_ms >= lim->cpu * 1e3 - 50))
		return LB_LIMIT_CPU;
	if (res->signal == SIGXFSZ || (lim->file_size && res->exit_code == 128 + SIGXFSZ))
		return LB_LIMIT_FILE_SIZE;
	return LB_LIMIT_NONE;
}

int lb_verdict(const lb_pending *p, const struct run_outcome *o, const lb_error *setup,
	       const lb_cgroup_usage *usage, lb_result *res, lb_error *err)
{
	double program_cpu_ms = -1;
	res->limit = o->limit;
	if (setup && setup->msg[0] == EXEC_MARK) {
		/* The command could not be started: the program's failure, told like a shell. */
		res->exit_code = setup->code == ENOENT ? 127 : 126;
	} else if (setup && !o->killed) {
		if (err)
			*err = *setup;
		return -1;
	} else if (o->got_status) {
		int st = o->final.wstatus;
		if (WIFEXITED(st)) {
			res->exit_code = WEXITSTATUS(st);
		} else if (WIFSIGNALED(st)) {
			res->signal = WTERMSIG(st);
			res->exit_code = 128 + res->signal;
		}
		program_cpu_ms = rusage_ms(&o->final.ru);
		res->max_rss = (uint64_t)o->final.ru.ru_maxrss * 1024;
		res->probe_found = o->final.probe != 0;
	} else {
		res->signal = SIGKILL;
		res->exit_code = 128 + SIGKILL;
	}
	/* The run's cgroup counts every process, including those a timeout killed before anything
	 * could report their usage; without one, the program's own usage when it reported it, and
	 * otherwise nothing rather than a wrong number. */
	res->cpu_ms = usage->cpu_ms >= 0 ? usage->cpu_ms : program_cpu_ms;
	if (usage->peak)
		res->max_rss = usage->peak;
	if (res->limit == LB_LIMIT_NONE && !o->killed)
		res->limit = kernel_limit(&p->limits, res, program_cpu_ms, usage);
	return 0;
}
