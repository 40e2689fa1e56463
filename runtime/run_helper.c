/* llmbox-run: the first child of every native run (C1 in chain.c) and of every native jail's
 * opening (K0 in jail.c), exec'd by the caller.
 *
 *   llmbox-run JOB_FD REPORT_FD
 *
 * JOB_FD is a memfd with the job (chain_wire.c), REPORT_FD the report pipe its setup failures
 * go to. An exec'd helper instead of a fork of the caller: a fork copies the caller's page tables
 * (and its exit tears them down again), which costs every run more the larger the caller is (an
 * OpenResty worker, a daemon with many sessions, a benchmark holding its samples), and it left a
 * copy of the caller's memory, secrets included, in the run's first child and its init. Static:
 * it starts without the dynamic loader, and nothing it needs can be missing from the host.
 *
 *   llmbox-run --libc
 *
 * says which C library it was built with ("musl" or "glibc"; `llmbox doctor` shows it).
 * Otherwise not a program for people: run by hand it finds no job and exits 127.
 */
#define _GNU_SOURCE
#include "run.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int fd_arg(const char *s)
{
	char *end;
	long v = s ? strtol(s, &end, 10) : -1;
	return s && *s && *end == '\0' && v >= 0 && v <= INT_MAX ? (int)v : -1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--libc") == 0) {
#ifdef __GLIBC__
		puts("glibc");
#else
		puts("musl");
#endif
		return 0;
	}
	int job_fd = argc == 3 ? fd_arg(argv[1]) : -1;
	int rep = argc == 3 ? fd_arg(argv[2]) : -1;
	if (job_fd < 0 || rep < 0) {
		fputs("llmbox-run: llmbox's helper, started by llmbox for each native jail and "
		      "run; "
		      "not for use by hand\n",
		      stderr);
		return 127;
	}
	static struct lb_helper_job job;
	lb_error e;
	if (lb_helper_job_decode(job_fd, &job, &e) < 0)
		lb_child_relay(rep, &e);
	close(job_fd);
	if (job.report_w != rep)
		lb_child_fail(rep, EINVAL, "a job for another report pipe");
	if (job.is_jail) {
		struct lb_jail_job *jj = &job.jail;
		lb_jail_first_child(&jj->cfg, jj->report_w, jj->sync_r, jj->parent);
	}
	struct lb_chain_job *r = &job.run;
	struct child_fds *f = &r->fds;
	int keep[16] = {f->in_r, f->out_w, f->err_w, f->status_w, f->report_w, f->stop_r, f->ctl};
	lb_close_fds_except(keep, lb_jail_keep_fds(&r->jail, keep, 7));
	lb_chain_first_child(&r->jail, &r->spec, r->filter, f, &r->cg, r->parent);
}
