/* Limits: rlimits for every run, plus a per-run cgroup (v2, or v1's memory and pids controllers)
 * where this process may create one. The cgroup is what makes memory and process limits exact
 * and observable (oom_kill and pids.max events); without one, RLIMIT_AS and RLIMIT_NPROC still
 * bound the program, and `llmbox doctor` says which mechanism is in force. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#define V1_ROOT "/sys/fs/cgroup"
#define V2_ROOT "/sys/fs/cgroup"

static int read_small(const char *path, char *buf, size_t len)
{
	_cleanup_fd_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = lb_read_full(fd, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* Value of `key N` lines in files such as memory.events or memory.oom_control. */
static uint64_t read_key(const char *dir, const char *file, const char *key)
{
	char path[512], buf[4096];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if (read_small(path, buf, sizeof buf) < 0)
		return 0;
	size_t kl = strlen(key);
	for (char *line = buf; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return strtoull(line + kl + 1, NULL, 10);
	return 0;
}

static uint64_t read_number(const char *dir, const char *file)
{
	char path[512], buf[64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if (read_small(path, buf, sizeof buf) < 0)
		return 0;
	return strtoull(buf, NULL, 10);
}

static int write_value(const char *dir, const char *file, const char *value)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	return lb_write_string_file(path, value);
}

static bool writable_dir(const char *path)
{
	return access(path, W_OK) == 0;
}

/* The parent directory under which per-run cgroups go, per version. LLMBOX_CGROUP names a
 * delegated v2 directory (e.g. one systemd gave an ordinary user). */
static int v2_base(char *out, size_t len)
{
	const char *env = getenv("LLMBOX_CGROUP");
	char controllers[256];
	if (env && *env) {
		snprintf(out, len, "%s", env);
	} else {
		char path[512];
		snprintf(path, sizeof path, V2_ROOT "/cgroup.controllers");
		if (read_small(path, controllers, sizeof controllers) < 0)
			return -1;
		if (!strstr(controllers, "memory") || !strstr(controllers, "pids"))
			return -1;
		snprintf(out, len, V2_ROOT "/llmbox");
	}
	return 0;
}

int lb_cgroup_detect(bool *memory, bool *pids, char *note, size_t note_len)
{
	char base[256];
	*memory = *pids = false;
	if (v2_base(base, sizeof base) == 0) {
		char parent[256];
		snprintf(parent, sizeof parent, "%s", base);
		char *slash = strrchr(parent, '/');
		if (slash)
			*slash = '\0';
		if (writable_dir(base) || writable_dir(parent)) {
			*memory = *pids = true;
			snprintf(note, note_len, "cgroup v2 at %s", base);
			return 2;
		}
		snprintf(note, note_len,
			 "cgroup v2 present but %s is not writable (run as root, or set "
			 "LLMBOX_CGROUP to a delegated cgroup)",
			 base);
		return 0;
	}
	*memory = writable_dir(V1_ROOT "/memory");
	*pids = writable_dir(V1_ROOT "/pids");
	if (*memory || *pids) {
		snprintf(note, note_len, "cgroup v1 (memory: %s, pids: %s)", *memory ? "yes" : "no",
			 *pids ? "yes" : "no");
		return 1;
	}
	snprintf(note, note_len,
		 "no writable cgroup (run as root, or delegate a cgroup v2 directory and set "
		 "LLMBOX_CGROUP)");
	return 0;
}

/* Removes per-run cgroups left by a caller that was killed mid-run (SIGKILL leaves no chance to
 * clean up): their names carry the creating pid. */
static void sweep_stale(const char *base)
{
	DIR *d = opendir(base);
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		int pid;
		if (sscanf(e->d_name, "run-%d-", &pid) != 1 || pid <= 0 || pid == getpid())
			continue;
		if (kill(pid, 0) < 0 && errno == ESRCH) {
			char path[512];
			snprintf(path, sizeof path, "%s/%s", base, e->d_name);
			rmdir(path);
		}
	}
	closedir(d);
}

static int make_run_dir(char *out, size_t len, const char *base, lb_error *err)
{
	static unsigned counter;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (mkdir(base, 0755) < 0 && errno != EEXIST)
		return lb_fail_sys(err, errno, "creating cgroup %s", base);
	sweep_stale(base); /* a handful of entries at most: cheap enough for every run */
	snprintf(out, len, "%s/run-%d-%u-%ld", base, (int)getpid(),
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), (long)ts.tv_nsec);
	if (mkdir(out, 0755) < 0)
		return lb_fail_sys(err, errno, "creating cgroup %s", out);
	return 0;
}

int lb_cgroup_create(lb_cgroup *cg, const lb_limits *lim, lb_error *err)
{
	bool mem, pids;
	char note[256], base[256], value[64];
	memset(cg, 0, sizeof *cg);
	cg->procs_fd[0] = cg->procs_fd[1] = -1;
	cg->version = lb_cgroup_detect(&mem, &pids, note, sizeof note);
	/* An operator who named a cgroup gets it or an error, never a silent fallback. */
	const char *env = getenv("LLMBOX_CGROUP");
	if (env && *env && cg->version == 0)
		return lb_fail(err, EACCES, "LLMBOX_CGROUP=%s cannot be used: %s", env, note);
	if (cg->version == 2) {
		v2_base(base, sizeof base);
		if (mkdir(base, 0755) < 0 && errno != EEXIST)
			return lb_fail_sys(err, errno, "creating cgroup %s", base);
		/* Enable the controllers for our children (a cgroup with processes cannot, so base
		 * must be a directory of its own, not the caller's cgroup). */
		char parent[256];
		snprintf(parent, sizeof parent, "%s", base);
		char *slash = strrchr(parent, '/');
		if (slash && !getenv("LLMBOX_CGROUP")) {
			*slash = '\0';
			(void)write_value(parent, "cgroup.subtree_control", "+memory +pids");
		}
		if (write_value(base, "cgroup.subtree_control", "+memory +pids") < 0)
			return lb_fail_sys(err, errno, "enabling memory and pids controllers in %s",
					   base);
		if (make_run_dir(cg->mem_dir, sizeof cg->mem_dir, base, err) < 0)
			return -1;
		if (lim->memory) {
			snprintf(value, sizeof value, "%llu", (unsigned long long)lim->memory);
			if (write_value(cg->mem_dir, "memory.max", value) < 0)
				return lb_fail_sys(err, errno, "setting memory.max in %s",
						   cg->mem_dir);
			(void)write_value(cg->mem_dir, "memory.swap.max", "0");
		}
		if (lim->processes) {
			snprintf(value, sizeof value, "%llu", (unsigned long long)lim->processes);
			if (write_value(cg->mem_dir, "pids.max", value) < 0)
				return lb_fail_sys(err, errno, "setting pids.max in %s",
						   cg->mem_dir);
		}
		char path[512];
		snprintf(path, sizeof path, "%s/cgroup.procs", cg->mem_dir);
		if ((cg->procs_fd[0] = open(path, O_WRONLY | O_CLOEXEC)) < 0)
			return lb_fail_sys(err, errno, "opening %s", path);
		return 0;
	}
	if (cg->version == 1) {
		if (mem) {
			if (make_run_dir(cg->mem_dir, sizeof cg->mem_dir, V1_ROOT "/memory/llmbox",
					 err) < 0)
				return -1;
			if (lim->memory) {
				snprintf(value, sizeof value, "%llu",
					 (unsigned long long)lim->memory);
				if (write_value(cg->mem_dir, "memory.limit_in_bytes", value) < 0)
					return lb_fail_sys(err, errno,
							   "setting the memory limit in %s",
							   cg->mem_dir);
				(void)write_value(cg->mem_dir, "memory.memsw.limit_in_bytes",
						  value);
			}
			char path[512];
			snprintf(path, sizeof path, "%s/cgroup.procs", cg->mem_dir);
			if ((cg->procs_fd[0] = open(path, O_WRONLY | O_CLOEXEC)) < 0)
				return lb_fail_sys(err, errno, "opening %s", path);
		}
		if (pids) {
			if (make_run_dir(cg->pids_dir, sizeof cg->pids_dir, V1_ROOT "/pids/llmbox",
					 err) < 0)
				return -1;
			if (lim->processes) {
				snprintf(value, sizeof value, "%llu",
					 (unsigned long long)lim->processes);
				if (write_value(cg->pids_dir, "pids.max", value) < 0)
					return lb_fail_sys(err, errno, "setting pids.max in %s",
							   cg->pids_dir);
			}
			char path[512];
			snprintf(path, sizeof path, "%s/cgroup.procs", cg->pids_dir);
			if ((cg->procs_fd[1] = open(path, O_WRONLY | O_CLOEXEC)) < 0)
				return lb_fail_sys(err, errno, "opening %s", path);
		}
	}
	return 0;
}

void lb_cgroup_read(const lb_cgroup *cg, bool *oom, bool *pids_max, uint64_t *peak)
{
	*oom = *pids_max = false;
	*peak = 0;
	if (cg->version == 2 && cg->mem_dir[0]) {
		*oom = read_key(cg->mem_dir, "memory.events", "oom_kill") > 0;
		*pids_max = read_key(cg->mem_dir, "pids.events", "max") > 0;
		*peak = read_number(cg->mem_dir, "memory.peak");
	} else if (cg->version == 1) {
		if (cg->mem_dir[0]) {
			*oom = read_key(cg->mem_dir, "memory.oom_control", "oom_kill") > 0;
			*peak = read_number(cg->mem_dir, "memory.max_usage_in_bytes");
		}
		if (cg->pids_dir[0])
			*pids_max = read_key(cg->pids_dir, "pids.events", "max") > 0;
	}
}

void lb_cgroup_destroy(lb_cgroup *cg)
{
	for (int i = 0; i < 2; i++)
		if (cg->procs_fd[i] >= 0) {
			close(cg->procs_fd[i]);
			cg->procs_fd[i] = -1;
		}
	const char *dirs[] = {cg->mem_dir, cg->pids_dir};
	for (int i = 0; i < 2; i++) {
		if (!dirs[i][0])
			continue;
		/* The run's processes are all reaped, but the kernel may need a moment to let go.
		 */
		for (int tries = 0; tries < 200 && rmdir(dirs[i]) < 0 && errno == EBUSY; tries++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
}

int lb_apply_rlimits(const lb_limits *lim, bool memory_in_cgroup, lb_error *err)
{
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
		{RLIMIT_NPROC, lim->processes, lim->processes, "processes", lim->processes > 0},
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
