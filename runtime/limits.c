/* Limits: the rlimits of every run's program. Per-run cgroups (cgroup.c) make memory and process
 * limits exact and observable where this process may create one; without one, RLIMIT_DATA,
 * RLIMIT_AS and RLIMIT_NPROC still bound the program. */
#define _GNU_SOURCE
#include "internal.h"

#include <sys/resource.h>

int lb_apply_rlimits(const lb_limits *lim, const lb_cgroup *cg, lb_error *err)
{
	bool memory_in_cgroup = lb_cgroup_enforces(cg, LB_CG_MEMORY);
	/* RLIMIT_NPROC counts the sandbox user's processes in the jail's user namespace, so it
	 * would refuse a fork at the same count as a pids cgroup (which also counts the run's
	 * first child, outside the jail) or before it, and a refused fork that the cgroup did not
	 * see is not reported as the processes limit. Where the cgroup enforces the limit,
	 * RLIMIT_NPROC stays one above it, a backstop that never fires first. */
	rlim_t nproc = lim->processes + (lb_cgroup_enforces(cg, LB_CG_PIDS) ? 1 : 0);
	rlim_t backstop = lim->memory * 4 > lim->memory + (2ULL << 30) ? lim->memory * 4
								       : lim->memory + (2ULL << 30);
	struct {
		int res;
		rlim_t soft, hard;
		const char *name;
		bool set;
	} r[] = {
		{RLIMIT_CPU, (rlim_t)(lim->cpu + 0.999), (rlim_t)(lim->cpu + 0.999) + 1, "cpu",
		 lim->cpu > 0},
		/* Without a memory cgroup: RLIMIT_DATA bounds what a program can allocate (heap and
		 * private mappings) without counting the address space that runtimes reserve but do
		 * not use (Go needs ~800M of it to start, V8 512M for its JIT); a loose RLIMIT_AS
		 * backstops shared mappings, which RLIMIT_DATA does not count. */
		{RLIMIT_DATA, lim->memory, lim->memory, "memory", lim->memory && !memory_in_cgroup},
		{RLIMIT_AS, backstop, backstop, "address space", lim->memory && !memory_in_cgroup},
		{RLIMIT_NPROC, nproc, nproc, "processes", lim->processes > 0},
		{RLIMIT_NOFILE, lim->open_files, lim->open_files, "open_files",
		 lim->open_files > 0},
		{RLIMIT_FSIZE, lim->file_size, lim->file_size, "file_size", lim->file_size > 0},
		{RLIMIT_CORE, 0, 0, "core", true},
	};
	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
		if (!r[i].set)
			continue;
		struct rlimit cur;
		getrlimit(r[i].res, &cur);
		struct rlimit want = {r[i].soft, r[i].hard};
		/* Lowering is always allowed; a limit above the current hard one cannot be set
		 * (root here may lack CAP_SYS_RESOURCE), and silently keeping a smaller one is
		 * fine: it is stricter than asked. */
		if (cur.rlim_max != RLIM_INFINITY && want.rlim_max > cur.rlim_max)
			want.rlim_max = cur.rlim_max;
		if (want.rlim_cur > want.rlim_max)
			want.rlim_cur = want.rlim_max;
		if (setrlimit(r[i].res, &want) < 0)
			return lb_fail_sys(err, errno, "setrlimit(%s)", r[i].name);
	}
	return 0;
}
