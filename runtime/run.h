/* What the files of one run share, and nothing else includes:
 *   chain.c      the process chain: starting it (lb_run_begin), stopping and reaping it
 *   supervise.c  the caller's side while it runs: output, stdin, clock, caps (lb_run_finish)
 *   verdict.c    the result: exit status, which limit fired, CPU time and memory
 *   spawn.c      a supervised process without a jail (lb_spawn), for wrapper backends
 */
#ifndef LLMBOX_RUN_H
#define LLMBOX_RUN_H

#include "internal.h"

#include <sys/resource.h>

/* Marks a report record as "execve of the program failed": the program's failure, not ours. */
#define EXEC_MARK '\x01'

/* What the run's init (C2) writes on the status pipe when the program has ended. */
struct status_msg {
	int wstatus;
	int probe; /* spec->probe is a directory with entries */
	struct rusage ru;
};

/* A started run: its first child, the host's ends of its pipes, its cgroups. Owned by the caller
 * of lb_run_begin until lb_run_finish or lb_run_abandon frees it. */
struct lb_pending {
	bool prestarted;
	pid_t c1;
	int out, err, status, report, in, ctl; /* host ends, -1 when closed */
	int stop; /* asks C1 to end the run (see lb_run_stop), -1 after */
	bool ready;
	lb_cgroup cg;
	lb_limits limits;
	double start;
};

double lb_now_ms(void);

/* The descriptors a run's processes hold, from the caller's fork to the program. */
struct child_fds {
	int in_r, out_w, err_w, status_w, report_w, lifeline_r;
	int stop_r; /* C1 only: the caller's end-of-run request */
	int ctl;    /* prestarted runs: the program's end of the control socket (fd 3), else -1 */
};

/* Shared by the jailed chain (chain.c) and jail-less spawns (spawn.c). */
const char *lb_resolve_command(const char *cmd, const char *const *envp, char *buf, size_t len);
/* The program's process: setsid, stdio, cwd, rlimits, the filter (NULL: none), execve. Reports
 * failures on fds->report_w. Never returns. */
_Noreturn void lb_exec_program(const lb_run_spec *spec, const lb_filter *filter,
			       struct child_fds *fds, const lb_cgroup *cg);

/* The start of a run's first child (C1, or spawn.c's S): it dies with the caller (and exits at
 * once if the caller is already gone), gets default signals and joins the run's cgroups. */
void lb_child_begin(int rep, pid_t parent, const lb_cgroup *cg);

/* C1, in the run helper: joins the run's cgroups and the jail's namespaces, starts C2 and waits
 * for the caller's word (see the top of chain.c). Never returns. */
_Noreturn void lb_chain_first_child(const lb_jail *j, const lb_run_spec *spec,
				    const lb_filter *filter, struct child_fds *fds,
				    const lb_cgroup *cg, pid_t parent);

/* What the caller tells the run helper (chain_wire.c). A run: its spec as the chain uses it (not
 * its stdin, callbacks or prestart flag, which stay with the caller), the filter, the cgroups,
 * the jail and the descriptors, which the helper inherits under the same numbers. A jail's
 * opening: its config and the two descriptors of lb_jail_open_begin's handshake. */
struct lb_chain_job {
	pid_t parent;
	lb_jail jail;
	struct child_fds fds;
	lb_cgroup cg;
	lb_run_spec spec;
	lb_filter *filter; /* NULL: none */
};

struct lb_jail_job {
	pid_t parent;
	int report_w, sync_r;
	lb_jail_config cfg;
};

struct lb_helper_job {
	bool is_jail;
	struct lb_chain_job run;
	struct lb_jail_job jail;
	int report_w; /* the one the job names */
	char *record; /* the job as read; the decoded strings point into it */
};

/* Writes a run's job to fd (a memfd the helper reads from its start). */
int lb_chain_encode(int fd, pid_t parent, const lb_jail *j, const lb_run_spec *spec,
		    const lb_filter *filter, const struct child_fds *fds, const lb_cgroup *cg,
		    lb_error *err);
/* Reads a job lb_chain_encode or lb_jail_job_encode wrote, from the start of fd; refuses one
 * from another build. The helper keeps the job for its life; lb_helper_job_free releases what a
 * decode allocated, whether it succeeded or not (the fuzz harness, fuzz/fuzz_job.c). */
int lb_helper_job_decode(int fd, struct lb_helper_job *job, lb_error *err);
void lb_helper_job_free(struct lb_helper_job *job);

/* Ends the run's processes: C1 kills the run's init (and with it the whole pid namespace),
 * reaps it and exits. Returns at once; calling it again does nothing. */
void lb_run_stop(lb_pending *p);

/* After lb_run_stop: reaps C1 and removes the cgroups. With `defer`, a run whose teardown need
 * not be waited for is left to lb_reap instead, when there is room for it. */
void lb_run_collect(lb_pending *p, bool defer);

/* How the supervision ended, for the verdict. */
struct run_outcome {
	bool killed;	 /* the supervisor stopped the run (a limit, an error) */
	bool got_status; /* the program's end was reported (by its init, or itself) */
	struct status_msg final;
	enum lb_limit limit; /* the limit the supervisor stopped the run for */
};

/* Fills res (but for the output) from the outcome, the setup report and the run's cgroups.
 * Returns -1 with err filled when the sandbox, not the program, failed. */
int lb_verdict(const lb_pending *p, const struct run_outcome *o, const lb_error *setup,
	       const lb_cgroup_usage *usage, lb_result *res, lb_error *err);

#endif
