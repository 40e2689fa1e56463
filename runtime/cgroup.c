/* Per-run cgroups: v2, or v1's memory, pids, cpu and cpuacct controllers, where this process may
 * create them. A cgroup is what makes memory and process limits exact and observable (oom_kill
 * and pids.max events), what enforces a CPU quota (limits.cpus), and what counts the CPU time of
 * a whole run, including the processes a timeout killed before they could report it. Without
 * one, rlimits still bound memory and processes (limits.c), a CPU quota is refused, and `llmbox
 * doctor` says which mechanism is in force. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define V1_ROOT "/sys/fs/cgroup"
#define V2_ROOT "/sys/fs/cgroup"

/* A quota is so many microseconds of CPU per period. */
#define CPU_PERIOD_US 100000

static const char *const v1_controllers[LB_CG_N] = {"memory", "pids", "cpuacct", "cpu"};

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

/* Value of a `key N` line in files such as memory.events or cpu.stat; -1 when absent. */
static int read_key(const char *dir, const char *file, const char *key, uint64_t *out)
{
	char path[512], buf[4096];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if (read_small(path, buf, sizeof buf) < 0)
		return -1;
	size_t kl = strlen(key);
	for (char *line = buf; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			*out = strtoull(line + kl + 1, NULL, 10);
			return 0;
		}
	return -1;
}

static uint64_t key_or_zero(const char *dir, const char *file, const char *key)
{
	uint64_t v = 0;
	return read_key(dir, file, key, &v) == 0 ? v : 0;
}

static int read_number(const char *dir, const char *file, uint64_t *out)
{
	char path[512], buf[64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if (read_small(path, buf, sizeof buf) < 0 || !(buf[0] >= '0' && buf[0] <= '9'))
		return -1;
	*out = strtoull(buf, NULL, 10);
	return 0;
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

/* "cpu" in "cpuset cpu io memory pids", as a whole word. */
static bool has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += wl)
		if ((p == list || p[-1] == ' ') && (p[wl] == '\0' || p[wl] == ' ' || p[wl] == '\n'))
			return true;
	return false;
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
		if (!has_word(controllers, "memory") || !has_word(controllers, "pids"))
			return -1;
		snprintf(out, len, V2_ROOT "/llmbox");
	}
	return 0;
}

/* v2: whether the cpu controller can be enabled for our runs: it must be available to base
 * (a delegated directory) or to its parent (the root, for our own /sys/fs/cgroup/llmbox). */
static bool v2_cpu_available(const char *base)
{
	char path[512], controllers[256];
	const char *env = getenv("LLMBOX_CGROUP");
	if (env && *env) {
		snprintf(path, sizeof path, "%s/cgroup.controllers", base);
	} else {
		snprintf(path, sizeof path, "%s", base);
		char *slash = strrchr(path, '/');
		if (slash)
			*slash = '\0';
		strncat(path, "/cgroup.controllers", sizeof path - strlen(path) - 1);
	}
	return read_small(path, controllers, sizeof controllers) == 0 &&
	       has_word(controllers, "cpu");
}

void lb_cgroup_detect(lb_cgroup_support *s)
{
	char base[256];
	memset(s, 0, sizeof *s);
	if (v2_base(base, sizeof base) == 0) {
		char parent[256];
		snprintf(parent, sizeof parent, "%s", base);
		char *slash = strrchr(parent, '/');
		if (slash)
			*slash = '\0';
		if (writable_dir(base) || writable_dir(parent)) {
			s->version = 2;
			s->memory = s->pids = s->cpuacct =
				true; /* cpu.stat is in every v2 cgroup */
			s->cpu = v2_cpu_available(base);
			snprintf(s->note, sizeof s->note,
				 "cgroup v2 at %.200s (cpu controller: %s)", base,
				 s->cpu ? "yes" : "no");
			return;
		}
		snprintf(s->note, sizeof s->note,
			 "cgroup v2 present but %.120s is not writable (run as root, or set "
			 "LLMBOX_CGROUP to a delegated cgroup)",
			 base);
		return;
	}
	s->memory = writable_dir(V1_ROOT "/memory");
	s->pids = writable_dir(V1_ROOT "/pids");
	s->cpuacct = writable_dir(V1_ROOT "/cpuacct");
	/* without CONFIG_CFS_BANDWIDTH the cpu controller has shares but no quota */
	s->cpu = writable_dir(V1_ROOT "/cpu") && access(V1_ROOT "/cpu/cpu.cfs_quota_us", F_OK) == 0;
	if (s->memory || s->pids || s->cpuacct || s->cpu) {
		s->version = 1;
		snprintf(s->note, sizeof s->note,
			 "cgroup v1 (memory: %s, pids: %s, cpu: %s, cpuacct: %s)",
			 s->memory ? "yes" : "no", s->pids ? "yes" : "no", s->cpu ? "yes" : "no",
			 s->cpuacct ? "yes" : "no");
		return;
	}
	snprintf(s->note, sizeof s->note,
		 "no writable cgroup (run as root, or delegate a cgroup v2 directory and set "
		 "LLMBOX_CGROUP)");
}

/* The pid namespace this process's pids mean something in; 0 when /proc cannot say. A process
 * keeps its pid namespace for life (a fork that unshared one has another pid), so it is read once
 * per pid, not at every run. */
static unsigned long pid_ns_id(void)
{
	static pid_t known_pid;
	static unsigned long known_ns;
	pid_t pid = getpid();
	if (__atomic_load_n(&known_pid, __ATOMIC_ACQUIRE) != pid) {
		struct stat st;
		unsigned long ns =
			stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
		if (!ns)
			return 0;
		__atomic_store_n(&known_ns, ns, __ATOMIC_RELAXED);
		__atomic_store_n(&known_pid, pid, __ATOMIC_RELEASE);
		return ns;
	}
	return __atomic_load_n(&known_ns, __ATOMIC_RELAXED);
}

/* An empty per-run cgroup of another pid namespace is left alone this long: its creator's pid
 * cannot be checked from here, and an empty cgroup is also one that its run is about to join. */
#define FOREIGN_STALE_S 600

/* Removes per-run cgroups left by a caller that was killed mid-run (SIGKILL leaves no chance to
 * clean up). Their names carry the creating pid and its pid namespace: in ours, a pid that no
 * longer exists means a dead creator; one from another namespace (llmbox in a container, or as
 * pid 1 of its own) is judged by age, since the same pid there is another process here. rmdir
 * never removes a cgroup that still has processes. */
static void sweep_stale(const char *base)
{
	DIR *d = opendir(base);
	if (!d)
		return;
	unsigned long own_ns = pid_ns_id();
	time_t now = time(NULL);
	for (struct dirent *e; (e = readdir(d));) {
		int pid;
		unsigned counter;
		long nsec;
		unsigned long ns = 0;
		if (sscanf(e->d_name, "run-%d-%u-%ld-%lu", &pid, &counter, &nsec, &ns) < 1 ||
		    pid <= 0 || (ns == own_ns && pid == getpid()))
			continue;
		char path[512];
		snprintf(path, sizeof path, "%s/%s", base, e->d_name);
		struct stat st;
		bool stale = own_ns && ns == own_ns
				     ? kill(pid, 0) < 0 && errno == ESRCH
				     : stat(path, &st) == 0 && now - st.st_mtime > FOREIGN_STALE_S;
		if (stale)
			rmdir(path);
	}
	closedir(d);
}

/* Whether base is due a sweep: at most one a second per directory and process. A sweep lists
 * the directory and looks at each stranger's entry, a dozen system calls on cgroupfs and /proc
 * for every run otherwise; what a killed caller left is still gone within a second of the next
 * run. */
#define SWEEP_EVERY_S 1
static bool sweep_due(const char *base, time_t now)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct {
		char base[256];
		time_t at;
		pid_t pid;
	} last[8];
	static unsigned next;
	pid_t pid = getpid();
	bool due = true;
	pthread_mutex_lock(&lock);
	size_t i = 0;
	for (; i < sizeof last / sizeof *last; i++)
		if (last[i].pid == pid && strcmp(last[i].base, base) == 0)
			break;
	if (i == sizeof last / sizeof *last) {
		i = next++ % (sizeof last / sizeof *last);
		snprintf(last[i].base, sizeof last[i].base, "%s", base);
		last[i].pid = pid;
	} else {
		due = now - last[i].at >= SWEEP_EVERY_S || now < last[i].at;
	}
	if (due)
		last[i].at = now;
	pthread_mutex_unlock(&lock);
	return due;
}

static int make_run_dir(char *out, size_t len, const char *base, lb_error *err)
{
	static unsigned counter;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (mkdir(base, 0755) < 0 && errno != EEXIST)
		return lb_fail_sys(err, errno, "creating cgroup %s", base);
	if (sweep_due(base, ts.tv_sec))
		sweep_stale(base);
	snprintf(out, len, "%s/run-%d-%u-%ld-%lu", base, (int)getpid(),
		 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), (long)ts.tv_nsec, pid_ns_id());
	if (mkdir(out, 0755) < 0)
		return lb_fail_sys(err, errno, "creating cgroup %s", out);
	return 0;
}

static int set_limit(const char *dir, const char *file, const char *value, lb_error *err)
{
	if (write_value(dir, file, value) < 0)
		return lb_fail_sys(err, errno, "setting %s to %s in %s", file, value, dir);
	return 0;
}

static unsigned long long cpu_quota_us(double cpus)
{
	return (unsigned long long)(cpus * CPU_PERIOD_US + 0.5);
}

static int create_v2(lb_cgroup *cg, const lb_limits *lim, lb_error *err)
{
	char base[256], value[64];
	v2_base(base, sizeof base);
	if (mkdir(base, 0755) < 0 && errno != EEXIST)
		return lb_fail_sys(err, errno, "creating cgroup %s", base);
	/* Enable the controllers for our children (a cgroup with processes cannot, so base must be
	 * a directory of its own, not the caller's cgroup). */
	char parent[256];
	snprintf(parent, sizeof parent, "%s", base);
	char *slash = strrchr(parent, '/');
	bool own_base = !getenv("LLMBOX_CGROUP") || !*getenv("LLMBOX_CGROUP");
	if (slash && own_base) {
		*slash = '\0';
		(void)write_value(parent, "cgroup.subtree_control", "+memory +pids");
	}
	if (write_value(base, "cgroup.subtree_control", "+memory +pids") < 0)
		return lb_fail_sys(err, errno, "enabling memory and pids controllers in %s", base);
	if (lim->cpus > 0) {
		if (slash && own_base)
			(void)write_value(parent, "cgroup.subtree_control", "+cpu");
		if (write_value(base, "cgroup.subtree_control", "+cpu") < 0)
			return lb_fail_sys(err, errno,
					   "enabling the cpu controller in %s for a CPU quota",
					   base);
	}
	char *dir = cg->dir[LB_CG_MEMORY];
	if (make_run_dir(dir, sizeof cg->dir[0], base, err) < 0)
		return -1;
	if (lim->memory) {
		snprintf(value, sizeof value, "%llu", (unsigned long long)lim->memory);
		if (set_limit(dir, "memory.max", value, err) < 0)
			return -1;
		(void)write_value(dir, "memory.swap.max", "0");
	}
	if (lim->processes) {
		snprintf(value, sizeof value, "%llu", (unsigned long long)lim->processes);
		if (set_limit(dir, "pids.max", value, err) < 0)
			return -1;
	}
	if (lim->cpus > 0) {
		snprintf(value, sizeof value, "%llu %d", cpu_quota_us(lim->cpus), CPU_PERIOD_US);
		if (set_limit(dir, "cpu.max", value, err) < 0)
			return -1;
	}
	return 0;
}

/* Two v1 controllers mounted together (cpu,cpuacct) share one directory tree. */
static bool same_hierarchy(const char *a, const char *b)
{
	struct stat sa, sb;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

static int create_v1(lb_cgroup *cg, const lb_limits *lim, const lb_cgroup_support *s, lb_error *err)
{
	char value[64], base[256];
	const bool want[LB_CG_N] = {s->memory, s->pids, s->cpuacct, s->cpu && lim->cpus > 0};
	for (int c = 0; c < LB_CG_N; c++) {
		if (!want[c])
			continue;
		if (c == LB_CG_CPU && cg->dir[LB_CG_CPUACCT][0] &&
		    same_hierarchy(V1_ROOT "/cpu", V1_ROOT "/cpuacct")) {
			memcpy(cg->dir[c], cg->dir[LB_CG_CPUACCT], sizeof cg->dir[c]);
			continue;
		}
		snprintf(base, sizeof base, V1_ROOT "/%s/llmbox", v1_controllers[c]);
		if (make_run_dir(cg->dir[c], sizeof cg->dir[c], base, err) < 0)
			return -1;
	}
	const char *mem = cg->dir[LB_CG_MEMORY], *pids = cg->dir[LB_CG_PIDS],
		   *cpu = cg->dir[LB_CG_CPU];
	if (mem[0] && lim->memory) {
		snprintf(value, sizeof value, "%llu", (unsigned long long)lim->memory);
		if (set_limit(mem, "memory.limit_in_bytes", value, err) < 0)
			return -1;
		(void)write_value(mem, "memory.memsw.limit_in_bytes", value);
	}
	if (pids[0] && lim->processes) {
		snprintf(value, sizeof value, "%llu", (unsigned long long)lim->processes);
		if (set_limit(pids, "pids.max", value, err) < 0)
			return -1;
	}
	if (cpu[0]) {
		snprintf(value, sizeof value, "%d", CPU_PERIOD_US);
		if (set_limit(cpu, "cpu.cfs_period_us", value, err) < 0)
			return -1;
		snprintf(value, sizeof value, "%llu", cpu_quota_us(lim->cpus));
		if (set_limit(cpu, "cpu.cfs_quota_us", value, err) < 0)
			return -1;
	}
	return 0;
}

/* lb_cgroup_detect as of at most a second ago (six system calls on cgroupfs, ~30 us, at every
 * run otherwise), read again when LLMBOX_CGROUP or the effective uid (what may be written)
 * changed. `llmbox doctor` asks afresh. */
static void detect_recent(lb_cgroup_support *s)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static lb_cgroup_support known;
	static char known_env[256];
	static time_t known_at;
	static uid_t known_uid;
	static bool valid;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	const char *env = getenv("LLMBOX_CGROUP");
	env = env ? env : "";
	uid_t uid = geteuid();
	pthread_mutex_lock(&lock);
	if (!valid || ts.tv_sec - known_at >= 1 || uid != known_uid ||
	    strcmp(env, known_env) != 0 || strlen(env) >= sizeof known_env) {
		lb_cgroup_detect(&known);
		snprintf(known_env, sizeof known_env, "%s", env);
		known_at = ts.tv_sec;
		known_uid = uid;
		valid = true;
	}
	*s = known;
	pthread_mutex_unlock(&lock);
}

int lb_cgroup_create(lb_cgroup *cg, const lb_limits *lim, lb_error *err)
{
	lb_cgroup_support s;
	memset(cg, 0, sizeof *cg);
	detect_recent(&s);
	cg->version = s.version;
	/* An operator who named a cgroup gets it or an error, never a silent fallback. */
	const char *env = getenv("LLMBOX_CGROUP");
	if (env && *env && s.version == 0)
		return lb_fail(err, EACCES, "LLMBOX_CGROUP=%s cannot be used: %s", env, s.note);
	/* A quota is a promise about the run: without a cpu cgroup to keep it, refuse the run. */
	if (lim->cpus > 0 && !s.cpu)
		return lb_fail(
			err, ENOTSUP,
			"a CPU quota was asked for (cpus = %g), but this host offers no cpu "
			"cgroup to enforce it (%s); run as root, or delegate a cgroup v2 "
			"directory with the cpu controller and set LLMBOX_CGROUP, or drop the "
			"cpus limit (see `llmbox doctor`)",
			lim->cpus, s.note);
	/* The kernel's smallest quota is 1 ms per period: a smaller one cannot be honoured. */
	if (lim->cpus > 0 && cpu_quota_us(lim->cpus) < 1000)
		return lb_fail(
			err, EINVAL,
			"cpus = %g is below the smallest CPU quota the kernel enforces (0.01)",
			lim->cpus);
	if (s.version == 2)
		return create_v2(cg, lim, err);
	if (s.version == 1)
		return create_v1(cg, lim, &s, err);
	return 0;
}

static bool seen_before(const lb_cgroup *cg, int c)
{
	for (int i = 0; i < c; i++)
		if (strcmp(cg->dir[i], cg->dir[c]) == 0)
			return true;
	return false;
}

/* Moving a process (cgroup.procs) takes the kernel's threadgroup lock for writing, which waits
 * for an RCU grace period unless a hierarchy is mounted with favordynmods: 5-27 ms measured on a
 * 2-core VM for the first move after a quiet moment, so every CLI run and every run after a
 * pause paid it. Moving only the calling thread (v1's `tasks`, "0" for itself) needs no such
 * lock, and the caller is always a run's first child, a fork, which has one thread: the same
 * move. v2 allows a lone thread to move only within a threaded subtree, so it keeps
 * cgroup.procs (clone3's CLONE_INTO_CGROUP would spare it the move). */
int lb_cgroup_join(const lb_cgroup *cg, lb_error *err)
{
	const char *file = cg->version == 1 ? "tasks" : "cgroup.procs";
	for (int c = 0; c < LB_CG_N; c++) {
		if (!cg->dir[c][0] || seen_before(cg, c))
			continue;
		if (write_value(cg->dir[c], file, "0") < 0)
			return lb_fail_sys(err, errno, "joining the run's cgroup %s", cg->dir[c]);
	}
	return 0;
}

void lb_cgroup_read(const lb_cgroup *cg, lb_cgroup_usage *u)
{
	memset(u, 0, sizeof *u);
	u->cpu_ms = -1;
	uint64_t v;
	if (cg->version == 2 && cg->dir[LB_CG_MEMORY][0]) {
		const char *dir = cg->dir[LB_CG_MEMORY];
		u->oom = key_or_zero(dir, "memory.events", "oom_kill") > 0;
		u->pids_refused = key_or_zero(dir, "pids.events", "max") > 0;
		if (read_number(dir, "memory.peak", &v) == 0)
			u->peak = v;
		if (read_key(dir, "cpu.stat", "usage_usec", &v) == 0)
			u->cpu_ms = (double)v / 1e3;
	} else if (cg->version == 1) {
		const char *mem = cg->dir[LB_CG_MEMORY], *pids = cg->dir[LB_CG_PIDS],
			   *acct = cg->dir[LB_CG_CPUACCT];
		if (mem[0]) {
			u->oom = key_or_zero(mem, "memory.oom_control", "oom_kill") > 0;
			if (read_number(mem, "memory.max_usage_in_bytes", &v) == 0)
				u->peak = v;
		}
		if (pids[0])
			u->pids_refused = key_or_zero(pids, "pids.events", "max") > 0;
		if (acct[0] && read_number(acct, "cpuacct.usage", &v) == 0)
			u->cpu_ms = (double)v / 1e6; /* nanoseconds */
	}
}

/* v2 keeps every controller in one directory. */
static const char *controller_dir(const lb_cgroup *cg, enum lb_cg_controller c)
{
	return cg->version == 2 ? cg->dir[LB_CG_MEMORY] : cg->dir[c];
}

bool lb_cgroup_enforces(const lb_cgroup *cg, enum lb_cg_controller c)
{
	return cg->version && controller_dir(cg, c)[0];
}

bool lb_cgroup_pids_refused(const lb_cgroup *cg)
{
	return lb_cgroup_enforces(cg, LB_CG_PIDS) &&
	       key_or_zero(controller_dir(cg, LB_CG_PIDS), "pids.events", "max") > 0;
}

void lb_cgroup_destroy(lb_cgroup *cg)
{
	for (int c = 0; c < LB_CG_N; c++) {
		if (!cg->dir[c][0] || seen_before(cg, c))
			continue;
		/* The run's processes are all reaped, but the kernel may need a moment to let go.
		 */
		for (int tries = 0; tries < 200 && rmdir(cg->dir[c]) < 0 && errno == EBUSY;
		     tries++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	for (int c = 0; c < LB_CG_N; c++)
		cg->dir[c][0] = '\0';
}
