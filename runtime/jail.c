/* The jail: namespaces and the filesystem the sandboxed program sees.
 *
 * lb_jail_open starts a setup child (K0: llmbox-run, exec'd, so it holds nothing of the caller's
 * memory) that creates new user, mount, network, uts, ipc, cgroup and pid namespaces; the caller
 * writes its uid/gid maps; K0 forks K1, pid 1 of the new pid namespace, which builds the root
 * filesystem (it must be in a new pid namespace to mount a /proc, which later runs need as proof
 * that /proc may be mounted). The caller then opens the namespace files and the setup processes
 * exit. The jail lives on as those fds: no daemon, no keeper process, and if the caller dies the
 * kernel frees everything.
 *
 * Root filesystem (the bubblewrap recipe): a tmpfs staging area, pivot_root into it with the host
 * root kept at /oldroot, build /newroot from bind mounts of /oldroot, pivot into /newroot and
 * detach the old root entirely, then make / read-only. Only /sandbox, /tmp and /dev/shm are
 * writable, and each is a size-limited tmpfs of this jail.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define STAGE	"/tmp"
#define NEWROOT "/newroot"
#define OLDROOT "/oldroot"

#ifndef MOUNT_ATTR_RDONLY /* linux/mount.h's values, for musl */
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV  0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* The kernel's struct mount_attr, spelled out: musl (the run helper's libc) has no
 * mount_setattr wrapper, and linux/mount.h clashes with glibc's sys/mount.h. */
struct lb_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

static int set_mount_attr(const char *path, bool recursive, uint64_t set)
{
	struct lb_mount_attr attr = {.attr_set = set};
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr,
			    sizeof attr);
}

/* mkdir -p for paths inside the new root (which only we can write during setup). */
static int mkpath(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return errno = ENAMETOOLONG, -1;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int touch_file(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkpath(dir, 0755) < 0)
			return -1;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int write_new_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	int r = lb_write_all(fd, content, strlen(content));
	close(fd);
	return r;
}

/* Bind-mounts host path `src` (already resolved, under /oldroot) at `dst` under /newroot,
 * read-only, nosuid, nodev, recursively (a submount of a read-only tree must not stay
 * writable). */
static void bind_ro(int report, const char *src, const char *dst, bool is_dir)
{
	char target[PATH_MAX];
	snprintf(target, sizeof target, NEWROOT "%s", dst);
	if ((is_dir ? mkpath(target, 0755) : touch_file(target)) < 0)
		lb_child_fail(report, errno, "creating mount point %s", dst);
	if (mount(src, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		lb_child_fail(report, errno, "bind-mounting %s at %s", src + strlen(OLDROOT), dst);
	if (set_mount_attr(target, true, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV) <
	    0)
		lb_child_fail(report, errno,
			      "making %s read-only (mount_setattr needs Linux >= 5.12)", dst);
}

static void mount_tmpfs(int report, const char *path, const char *opts, unsigned long flags)
{
	if (mkpath(path, 0755) < 0)
		lb_child_fail(report, errno, "mkdir %s", path);
	if (mount("tmpfs", path, "tmpfs", flags, opts) < 0)
		lb_child_fail(report, errno, "mounting tmpfs at %s (%s)", path, opts);
}

static void loopback_up(int report)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		lb_child_fail(report, errno, "socket for loopback setup");
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		lb_child_fail(report, errno, "SIOCGIFFLAGS lo");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		lb_child_fail(report, errno, "bringing loopback up");
	close(s);
}

/* Merged-/usr hosts have /bin -> usr/bin etc.: recreate those links; on other hosts bind the
 * directories read-only. */
static void top_level_links(int report, const char *rootfs)
{
	static const char *const tops[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
	for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
		char host[PATH_MAX], inside[PATH_MAX], link[PATH_MAX];
		/* (a root filesystem's own: its links are recreated as they are, they point inside)
		 */
		if (snprintf(host, sizeof host, OLDROOT "%s%s", rootfs ? rootfs : "", tops[i]) >=
		    (int)sizeof host)
			lb_child_fail(report, ENAMETOOLONG, "the root filesystem's %s", tops[i]);
		snprintf(inside, sizeof inside, NEWROOT "%s", tops[i]);
		struct stat st;
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(host, link, sizeof link - 1);
			if (n < 0)
				lb_child_fail(report, errno, "readlink %s", tops[i]);
			link[n] = '\0';
			if (symlink(link, inside) < 0 && errno != EEXIST)
				lb_child_fail(report, errno, "symlink %s", tops[i]);
		} else if (S_ISDIR(st.st_mode)) {
			bind_ro(report, host, tops[i], true);
		}
	}
}

static void setup_dev(int report, const char *shm_opts)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
	mount_tmpfs(report, NEWROOT "/dev", "mode=0755,size=64k", MS_NOSUID | MS_NOEXEC);
	for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		char src[64], dst[64];
		snprintf(src, sizeof src, OLDROOT "/dev/%s", nodes[i]);
		snprintf(dst, sizeof dst, NEWROOT "/dev/%s", nodes[i]);
		if (touch_file(dst) < 0)
			lb_child_fail(report, errno, "creating /dev/%s", nodes[i]);
		/* A bind of the host's node: device nodes cannot be created in a user namespace. */
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			lb_child_fail(report, errno, "bind-mounting /dev/%s", nodes[i]);
		if (set_mount_attr(dst, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC) < 0)
			lb_child_fail(report, errno, "securing /dev/%s", nodes[i]);
	}
	static const char *const links[][2] = {{"/proc/self/fd", "fd"},
					       {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
		char dst[64];
		snprintf(dst, sizeof dst, NEWROOT "/dev/%s", links[i][1]);
		if (symlink(links[i][0], dst) < 0)
			lb_child_fail(report, errno, "symlink /dev/%s", links[i][1]);
	}
	mount_tmpfs(report, NEWROOT "/dev/shm", shm_opts, MS_NOSUID | MS_NODEV);
	if (set_mount_attr(NEWROOT "/dev", false, MOUNT_ATTR_RDONLY) < 0)
		lb_child_fail(report, errno, "making /dev read-only");
}

bool lb_jail_etc(size_t i, const char *hostname, const char **name, const char **content, char *buf,
		 size_t len)
{
	static const char *const files[][2] = {
		{"passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\n"
			   "sandbox:x:1000:1000:sandbox:/sandbox:/bin/sh\n"
			   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
		{"group", "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"},
		{"hosts", NULL}, /* below: names the hostname */
		{"nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n"},
		{"hostname", NULL}, /* the hostname */
	};
	if (i >= sizeof files / sizeof files[0])
		return false;
	*name = files[i][0];
	*content = files[i][1];
	if (i == 2) {
		snprintf(buf, len, "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost\n",
			 hostname);
		*content = buf;
	} else if (i == 4) {
		*content = hostname;
	}
	return true;
}

/* hosts_extra: lines for /etc/hosts after the jail's own (egress's pinned names), or NULL. */
static void write_etc(int report, const char *hostname, const char *hosts_extra)
{
	if (mkpath(NEWROOT "/etc", 0755) < 0)
		lb_child_fail(report, errno, "mkdir /etc");
	const char *name, *content;
	char buf[512];
	for (size_t i = 0; lb_jail_etc(i, hostname, &name, &content, buf, sizeof buf); i++) {
		char path[128];
		snprintf(path, sizeof path, NEWROOT "/etc/%s", name);
		char *joined = NULL;
		if (hosts_extra && !strcmp(name, "hosts")) {
			if (asprintf(&joined, "%s%s", content, hosts_extra) < 0)
				lb_child_fail(report, ENOMEM, "writing /etc/hosts");
			content = joined;
		}
		if (write_new_file(path, content) < 0)
			lb_child_fail(report, errno, "writing /etc/%s", name);
		free(joined);
	}
}

/* K1: pid 1 of the setup pid namespace; builds the root filesystem. Never returns. */
static void build_root(int report, int sync, const lb_jail_config *cfg)
{
	const char *hostname = cfg->hostname ? cfg->hostname : "llmbox";

	/* Resolve bind sources in the host's view before the root moves: an absolute symlink such
	 * as /etc/localtime -> /usr/share/zoneinfo/... would otherwise resolve against the staging
	 * root. */
	char rootfs_real[PATH_MAX] = "";
	if (cfg->rootfs && !realpath(cfg->rootfs, rootfs_real))
		lb_child_fail(
			report, errno,
			"the root filesystem %s (the jail reads it as its host uid: yours, or %d "
			"when llmbox runs as root; it and the directories above it must be "
			"readable "
			"and searchable by that user)",
			cfg->rootfs, (int)cfg->host_uid);
	char(*src)[PATH_MAX] = calloc(cfg->n_ro ? cfg->n_ro : 1, PATH_MAX);
	bool *is_dir = calloc(cfg->n_ro ? cfg->n_ro : 1, sizeof(bool));
	if (!src || !is_dir)
		lb_child_fail(report, ENOMEM, "out of memory");
	for (size_t i = 0; i < cfg->n_ro; i++) {
		char real[PATH_MAX];
		struct stat st;
		bool found = cfg->ro[i].in_root && cfg->rootfs
				     ? lb_resolve_in_root(cfg->rootfs, cfg->ro[i].src, real,
							  sizeof real) == 0
				     : realpath(cfg->ro[i].src, real) != NULL;
		if (!found || stat(real, &st) < 0) {
			if (cfg->ro[i].optional && errno == ENOENT) {
				src[i][0] = '\0';
				continue;
			}
			if (cfg->ro[i].in_root && cfg->rootfs)
				lb_child_fail(
					report, errno,
					"read-only path %s is not in the root filesystem %s (use "
					"an image that has it, or mark it optional in the "
					"policy's filesystem.ro)",
					cfg->ro[i].src, cfg->rootfs);
			lb_child_fail(
				report, errno,
				"read-only path %s is not available on this host (remove it from "
				"the policy's filesystem.ro or mark it optional)",
				cfg->ro[i].src);
		}
		if (snprintf(src[i], PATH_MAX, OLDROOT "%s", real) >= PATH_MAX)
			lb_child_fail(report, ENAMETOOLONG, "path %s", real);
		is_dir[i] = S_ISDIR(st.st_mode);
	}

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		lb_child_fail(report, errno, "making mounts private");
	if (mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
		lb_child_fail(report, errno, "mounting the staging tmpfs");
	if (mkdir(STAGE NEWROOT, 0755) < 0 || mkdir(STAGE OLDROOT, 0755) < 0)
		lb_child_fail(report, errno, "staging directories");
	if (syscall(SYS_pivot_root, STAGE, STAGE OLDROOT) < 0)
		lb_child_fail(report, errno, "pivot_root into the staging area");
	if (chdir("/") < 0)
		lb_child_fail(report, errno, "chdir /");

	mount_tmpfs(report, NEWROOT, "mode=0755,size=4m", MS_NOSUID | MS_NODEV);
	top_level_links(report, rootfs_real[0] ? rootfs_real : NULL);
	write_etc(report, hostname, cfg->hosts_extra);

	char opts[128];
	snprintf(opts, sizeof opts, "mode=0755,uid=%d,gid=%d,size=%llu", LB_SANDBOX_UID,
		 LB_SANDBOX_GID, (unsigned long long)cfg->workspace_size);
	mount_tmpfs(report, NEWROOT "/sandbox", opts, MS_NOSUID | MS_NODEV);
	char tmp_opts[128];
	snprintf(tmp_opts, sizeof tmp_opts, "mode=1777,size=%llu",
		 (unsigned long long)cfg->tmp_size);
	mount_tmpfs(report, NEWROOT "/tmp", tmp_opts, MS_NOSUID | MS_NODEV);
	setup_dev(report, tmp_opts);
	/* After the tmpfs mounts, so a read-only path below /tmp (an offline package source, say)
	 * stays visible instead of being hidden under the new /tmp. */
	for (size_t i = 0; i < cfg->n_ro; i++)
		if (src[i][0])
			bind_ro(report, src[i], cfg->ro[i].dst, is_dir[i]);

	/* This /proc belongs to the setup pid namespace and goes empty when K1 exits; each run
	 * mounts its own on top. Mounting it now, while the host's /proc is still reachable, is
	 * what lets the kernel allow those later mounts. */
	if (mkpath(NEWROOT "/proc", 0555) < 0 ||
	    mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		lb_child_fail(report, errno, "mounting /proc");

	if (sethostname(hostname, strlen(hostname)) < 0 || setdomainname("llmbox", 6) < 0)
		lb_child_fail(report, errno, "setting the hostname");
	loopback_up(report);

	if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		lb_child_fail(report, errno, "pivot_root into the new root");
	/* The old root is now stacked on top of the new one: detach it and everything below it
	 * (the host's whole tree) from this namespace for good. */
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		lb_child_fail(report, errno, "detaching the host's root");
	if (set_mount_attr("/", false, MOUNT_ATTR_RDONLY) < 0)
		lb_child_fail(report, errno, "making / read-only");

	free(src);
	free(is_dir);
	lb_child_progress(report, 'r');
	/* Stay until the caller has opened the namespace files. */
	char c;
	while (read(sync, &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

static int write_maps(pid_t pid, uid_t host_uid, gid_t host_gid, lb_error *err)
{
	char path[64], map[64];
	snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
	if (lb_write_string_file(path, "deny") < 0 && errno != ENOENT)
		return lb_fail_sys(err, errno, "writing %s", path);
	snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
	snprintf(map, sizeof map, "%d %u 1\n", LB_SANDBOX_GID, (unsigned)host_gid);
	if (lb_write_string_file(path, map) < 0)
		return lb_fail_sys(err, errno, "writing %s (%s)", path, map);
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	snprintf(map, sizeof map, "%d %u 1\n", LB_SANDBOX_UID, (unsigned)host_uid);
	if (lb_write_string_file(path, map) < 0)
		return lb_fail_sys(err, errno, "writing %s (%s)", path, map);
	return 0;
}

static int open_ns(pid_t pid, const char *name, bool optional, lb_error *err)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && !(optional && errno == ENOENT))
		return lb_fail_sys(err, errno, "opening %s", path);
	return fd;
}

/* Work a child of the caller does for a jail (opening it, emptying it), as steps an event loop
 * can drive: the caller watches one fd and reads each record only once it is there, so no step
 * waits for the child. Opening: the report pipe until the root is built, then a pidfd of K0
 * until it has exited; emptying: the helper's pidfd, then its report. */
enum task_state { TASK_WAIT_NS, TASK_WAIT_ROOT, TASK_WAIT_EXIT, TASK_OVER };

struct lb_jail_task {
	enum task_state state;
	lb_jail *j;   /* open: the jail being made (the task's until lb_jail_task_end) */
	bool opening; /* false: emptying j, which the caller owns */
	pid_t child;  /* K0, or the emptying helper; -1 once reaped */
	int report;   /* our end of the child's report pipe */
	int sync;     /* open: our end of the sync pipe (EOF lets the setup children go) */
	int pidfd;    /* the child's, while waiting for its exit; -1 otherwise */
	bool failed;
	lb_error err;
};

static lb_jail_task *task_new(lb_jail *j, bool opening, lb_error *err)
{
	lb_jail_task *t = calloc(1, sizeof *t);
	if (!t) {
		lb_fail(err, ENOMEM, "out of memory");
		return NULL;
	}
	*t = (lb_jail_task){
		.j = j, .opening = opening, .child = -1, .report = -1, .sync = -1, .pidfd = -1};
	return t;
}

static void task_fail(lb_jail_task *t, const lb_error *e)
{
	if (!t->failed) {
		t->failed = true;
		t->err = *e;
	}
}

/* Lets the child go and waits (by steps) for its exit. */
static void task_await_exit(lb_jail_task *t)
{
	lb_close_fd(&t->sync);
	if (t->child > 0 && t->pidfd < 0)
		t->pidfd = (int)syscall(SYS_pidfd_open, t->child, 0);
	t->state = TASK_WAIT_EXIT;
}

static void task_reaped(lb_jail_task *t, int status)
{
	t->child = -1;
	lb_close_fd(&t->pidfd);
	if (!t->opening && !t->failed) {
		/* The helper's report: a failure record, or nothing when it emptied everything. */
		lb_error rec;
		if (lb_read_report(t->report, &rec))
			task_fail(t, &rec);
		else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			lb_error e;
			lb_fail(&e, EIO, "resetting the jail: the helper died");
			task_fail(t, &e);
		}
	}
	lb_close_fd(&t->report);
	t->state = TASK_OVER;
}

/* Open: the record K0 or K1 sent ('u' namespaces made, 'r' root built, or a failure). */
static void open_record(lb_jail_task *t)
{
	lb_error rec, e;
	if (!lb_read_report(t->report, &rec)) {
		lb_fail(&e, EIO, "jail setup child died without a report");
		task_fail(t, &e);
		task_await_exit(t);
		return;
	}
	char want = t->state == TASK_WAIT_NS ? 'u' : 'r';
	if (rec.code != LB_PROGRESS || rec.msg[0] != want) {
		task_fail(t, &rec);
		task_await_exit(t);
		return;
	}
	lb_jail *j = t->j;
	if (want == 'u') {
		if (write_maps(t->child, j->host_uid, j->host_gid, &e) < 0) {
			task_fail(t, &e);
			task_await_exit(t);
			return;
		}
		(void)lb_write_all(t->sync, "m", 1);
		t->state = TASK_WAIT_ROOT;
		return;
	}
	if ((j->userns = open_ns(t->child, "user", false, &e)) < 0 ||
	    (j->mntns = open_ns(t->child, "mnt", false, &e)) < 0 ||
	    (j->netns = open_ns(t->child, "net", false, &e)) < 0 ||
	    (j->utsns = open_ns(t->child, "uts", false, &e)) < 0)
		task_fail(t, &e);
	else
		j->cgroupns = open_ns(t->child, "cgroup", true, NULL);
	/* No kill: K1 would outlive K0 as an orphan for someone else to reap. EOF on the sync pipe
	 * ends whichever of them waits on it (K0 for the maps, K1 once the root is built), and K0
	 * reaps K1; a child that failed has exited already. */
	task_await_exit(t);
}

int lb_jail_task_fd(const lb_jail_task *t)
{
	switch (t->state) {
	case TASK_WAIT_NS:
	case TASK_WAIT_ROOT:
		return t->report;
	case TASK_WAIT_EXIT:
		return t->pidfd;
	default:
		return -1;
	}
}

int lb_jail_task_step(lb_jail_task *t, int wait_ms)
{
	if (t->state == TASK_OVER)
		return 1;
	int fd = lb_jail_task_fd(t);
	if (fd >= 0) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int r;
		while ((r = poll(&pf, 1, wait_ms)) < 0 && errno == EINTR)
			;
		if (r <= 0)
			return 0;
	}
	if (t->state != TASK_WAIT_EXIT) {
		open_record(t);
		return 0;
	}
	/* Without a pidfd (pidfd_open failed) this waits for an exit that is at hand. */
	int st = 0;
	pid_t r;
	while ((r = waitpid(t->child, &st, fd >= 0 ? WNOHANG : 0)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return 0;
	task_reaped(t, st);
	return 1;
}

int lb_jail_task_end(lb_jail_task *t, lb_jail **jail, lb_error *err)
{
	while (!lb_jail_task_step(t, -1))
		;
	int rc = 0;
	if (t->failed) {
		if (err)
			*err = t->err;
		rc = -1;
	}
	if (t->opening) {
		if (rc == 0 && jail)
			*jail = t->j;
		else
			lb_jail_close(t->j);
	}
	free(t);
	return rc;
}

void lb_jail_task_discard(lb_jail_task *t)
{
	if (!t)
		return;
	lb_close_fd(&t->sync);
	lb_close_fd(&t->report);
	lb_close_fd(&t->pidfd);
	if (t->child > 0) {
		/* The helper of an emptying is told nothing: it is killed. The setup children of an
		 * opening end on EOF of the sync pipe (and K1 by K0's death). Either way they are
		 * collected later (lb_reap), never waited for here. */
		if (!t->opening)
			kill(t->child, SIGKILL);
		lb_bury_pid(t->child);
	}
	if (t->opening)
		lb_jail_close(t->j);
	free(t);
}

/* K0, in the run helper (exec'd by lb_jail_open_begin): makes the jail's namespaces, waits for
 * the caller to write their id maps, and starts K1 to build the root. Never returns. */
void lb_jail_first_child(const lb_jail_config *cfg, int report_w, int sync_r, pid_t parent)
{
	bool root = geteuid() == 0;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	lb_reset_signals();
	int keep[] = {report_w, sync_r};
	lb_close_fds_except(keep, 2);
	if (root && setgroups(0, NULL) < 0)
		lb_child_fail(report_w, errno, "setgroups");
	int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC |
		    CLONE_NEWPID;
	if (unshare(flags | CLONE_NEWCGROUP) < 0 && unshare(flags) < 0)
		lb_child_fail(report_w, errno,
			      "creating namespaces (are user namespaces enabled? see `llmbox "
			      "doctor`)");
	lb_child_progress(report_w, 'u');
	char c;
	if (read(sync_r, &c, 1) != 1) /* maps written */
		_exit(127);
	/* Become the mapped sandbox ids (capabilities in the new namespace stay): files made on
	 * this jail's tmpfs need an owner that exists inside it. */
	if (setresgid(LB_SANDBOX_GID, LB_SANDBOX_GID, LB_SANDBOX_GID) < 0 ||
	    setresuid(LB_SANDBOX_UID, LB_SANDBOX_UID, LB_SANDBOX_UID) < 0)
		lb_child_fail(report_w, errno, "switching to the sandbox ids");
	/* vfork: K0 only waits for K1. K1 runs on while K0 is suspended; K0 afterwards only makes
	 * system calls (close, waitpid, _exit), so what K1 does to the shared memory does not
	 * matter to it. The caller talks to K1 by explicit records, never by EOF. */
	pid_t k1 = vfork();
	if (k1 < 0)
		lb_child_fail(report_w, errno, "fork into the new pid namespace");
	if (k1 == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		build_root(report_w, sync_r, cfg);
	}
	close(report_w);
	int st;
	while (waitpid(k1, &st, 0) < 0 && errno == EINTR)
		;
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
}

lb_jail_task *lb_jail_open_begin(const lb_jail_config *cfg, lb_error *err)
{
	int report[2] = {-1, -1}, sync[2] = {-1, -1}, job = -1;
	lb_jail *j = calloc(1, sizeof *j);
	if (!j) {
		lb_fail(err, ENOMEM, "out of memory");
		return NULL;
	}
	j->userns = j->mntns = j->netns = j->utsns = j->cgroupns = -1;
	bool root = geteuid() == 0;
	j->host_uid = root ? cfg->host_uid : geteuid();
	j->host_gid = root ? cfg->host_gid : getegid();
	lb_jail_task *t = NULL;
	if (root && j->host_uid == 0) {
		lb_fail(err, EINVAL,
			"refusing to map the sandbox user to host root (host_uid = 0)");
		goto fail;
	}
	if (lb_fd_check(LB_FDS_SESSION, "open another sandbox session", err) < 0)
		goto fail;
	if (!(t = task_new(j, true, err)))
		goto fail;
	if (pipe2(report, O_CLOEXEC) < 0 || pipe2(sync, O_CLOEXEC) < 0) {
		lb_fail_sys(err, errno, "pipe2");
		goto fail;
	}
	job = memfd_create("llmbox-jail-job", MFD_CLOEXEC);
	if (job < 0) {
		lb_fail_sys(err, errno, "memfd_create");
		goto fail;
	}
	if (lb_jail_job_encode(job, getpid(), cfg, report[1], sync[0], err) < 0)
		goto fail;
	int pass[] = {report[1], sync[0]};
	pid_t k0 = lb_exec_helper(job, pass, 2, report[1], err);
	if (k0 < 0)
		goto fail;
	close(job);
	close(report[1]);
	close(sync[0]);
	/* The report pipe carries lb_error records: progress ("u": namespaces made, "r": root
	 * built) with code LB_PROGRESS, or one failure, after which the child exits. */
	t->child = k0;
	t->report = report[0];
	t->sync = sync[1];
	t->state = TASK_WAIT_NS;
	return t;
fail:
	for (int i = 0; i < 2; i++) {
		if (report[i] >= 0)
			close(report[i]);
		if (sync[i] >= 0)
			close(sync[i]);
	}
	if (job >= 0)
		close(job);
	free(t);
	lb_jail_close(j);
	return NULL;
}

lb_jail *lb_jail_open(const lb_jail_config *cfg, lb_error *err)
{
	lb_jail_task *t = lb_jail_open_begin(cfg, err);
	lb_jail *j = NULL;
	if (t && lb_jail_task_end(t, &j, err) < 0)
		return NULL;
	return j;
}

int lb_jail_use_netns(lb_jail *j, int netns, lb_error *err)
{
	int fd = fcntl(netns, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return lb_fail_sys(err, errno, "dup");
	close(j->netns);
	j->netns = fd;
	return 0;
}

void lb_jail_close(lb_jail *j)
{
	if (!j)
		return;
	int *fds[] = {&j->userns, &j->mntns, &j->netns, &j->utsns, &j->cgroupns};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	free(j);
}

int lb_jail_enter(const lb_jail *j, lb_error *err)
{
	if (geteuid() == 0 && setgroups(0, NULL) < 0)
		return lb_fail_sys(err, errno, "setgroups");
	/* User namespace first: joining it grants the capabilities needed to join the others. */
	if (setns(j->userns, CLONE_NEWUSER) < 0)
		return lb_fail_sys(err, errno, "joining the jail's user namespace");
	if (setns(j->mntns, CLONE_NEWNS) < 0)
		return lb_fail_sys(err, errno, "joining the jail's mount namespace");
	if (setns(j->netns, CLONE_NEWNET) < 0)
		return lb_fail_sys(err, errno, "joining the jail's network namespace");
	if (setns(j->utsns, CLONE_NEWUTS) < 0)
		return lb_fail_sys(err, errno, "joining the jail's uts namespace");
	if (j->cgroupns >= 0 && setns(j->cgroupns, CLONE_NEWCGROUP) < 0)
		return lb_fail_sys(err, errno, "joining the jail's cgroup namespace");
	return 0;
}

size_t lb_jail_keep_fds(const lb_jail *j, int *keep, size_t n)
{
	const int fds[] = {j->userns, j->mntns, j->netns, j->utsns, j->cgroupns};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (fds[i] >= 0)
			keep[n++] = fds[i];
	return n;
}

/* Empties one writable tree of the jail, leaving mount points (read-only binds below /tmp) and
 * the directory itself in place. Runs as the jail's root, whose capabilities reach every file the
 * sandbox user made, whatever modes it set. */
static int empty_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	struct stat top;
	DIR *d = fstat(fd, &top) == 0 ? fdopendir(fd) : NULL;
	if (!d) {
		close(fd);
		return -1;
	}
	for (struct dirent *e; (e = readdir(d));) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != top.st_dev)
			continue;
		if (unlinkat(fd, e->d_name, 0) < 0 && errno == EISDIR)
			lb_remove_tree_at(fd, e->d_name);
	}
	closedir(d);
	return 0;
}

lb_jail_task *lb_jail_reset_begin(lb_jail *j, lb_error *err)
{
	int report[2];
	/* Only the helper uses the jail (its own copies of the namespace fds): the task does not
	 * borrow it, so the jail may be closed while the task runs. */
	lb_jail_task *t = task_new(NULL, false, err);
	if (!t)
		return NULL;
	if (pipe2(report, O_CLOEXEC) < 0) {
		lb_fail_sys(err, errno, "pipe2");
		free(t);
		return NULL;
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(report[0]);
		close(report[1]);
		lb_fail_sys(err, errno, "fork");
		free(t);
		return NULL;
	}
	if (pid == 0) {
		close(report[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int keep[16] = {report[1]};
		lb_close_fds_except(keep, lb_jail_keep_fds(j, keep, 1));
		lb_error e;
		if (lb_jail_enter(j, &e) < 0)
			lb_child_relay(report[1], &e);
		static const char *const trees[] = {"/sandbox", "/tmp", "/dev/shm"};
		for (size_t i = 0; i < sizeof trees / sizeof trees[0]; i++)
			if (empty_dir(trees[i]) < 0)
				lb_child_fail(report[1], errno, "emptying %s", trees[i]);
		_exit(0);
	}
	close(report[1]);
	t->child = pid;
	t->report = report[0];
	task_await_exit(t);
	return t;
}

int lb_jail_reset(lb_jail *j, lb_error *err)
{
	lb_jail_task *t = lb_jail_reset_begin(j, err);
	return t ? lb_jail_task_end(t, NULL, err) : -1;
}
