/* Jobs on their way from the caller to llmbox-run (run_helper.c), which is exec'd and so starts
 * with nothing of the caller's memory. One flat record in a memfd, of one of two kinds:
 *
 *   a run: magic "llmbox-run-job ID\0", the sizes of the structs copied whole (a helper from
 *   another build is refused, never misread), the caller's pid, then lb_jail, child_fds,
 *   lb_cgroup and lb_limits as they are in memory; then cwd, hosts and probe as strings, argv,
 *   envp and clean as lists, the files, and the filter's BPF program (0 bytes: none);
 *   a jail's opening: magic "llmbox-jail-job ID\0", the caller's pid, the report and sync
 *   descriptors, the workspace's and /tmp's sizes, the host uid and gid, hostname, hosts_extra
 *   and rootfs as strings, and the read-only mounts (src, dst, optional, in_root).
 *
 * A string is a u32 length and its bytes with a NUL after them (UINT32_MAX: NULL), a list a u32
 * count of strings, a file its path, a u32 mode and a u64 length with its bytes. Strings are
 * read in place: the decoded spec points into the record, which stays for the helper's life.
 */
#define _GNU_SOURCE
#include "run.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

/* What identifies the format: make passes a digest of the headers and of this file
 * (LB_WIRE_ID), so a helper and a library built from other sources refuse each other's jobs
 * instead of reading another layout (an upgrade under a running daemon, say). */
#ifndef LB_WIRE_ID
#define LB_WIRE_ID "unversioned"
#endif
static const char MAGIC[] = "llmbox-run-job " LB_WIRE_ID;
static const char JAIL_MAGIC[] = "llmbox-jail-job " LB_WIRE_ID;

static const char ANOTHER_BUILD[] =
	"llmbox-run is from another build than the library that started it: reinstall llmbox "
	"(make install) so the two match";

struct sizes {
	uint32_t jail, fds, cg, limits;
};

static const struct sizes SIZES = {sizeof(lb_jail), sizeof(struct child_fds), sizeof(lb_cgroup),
				   sizeof(lb_limits)};

/* ---- writing: one growing buffer, written out at the end ---- */

struct out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const void *p, size_t n)
{
	if (o->failed || n == 0)
		return;
	if (o->len + n > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		while (cap < o->len + n)
			cap *= 2;
		char *b = realloc(o->buf, cap);
		if (!b) {
			o->failed = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

static void put_u32(struct out *o, uint32_t v)
{
	put(o, &v, sizeof v);
}

static void put_bytes(struct out *o, const char *s, size_t n)
{
	if (!s) {
		put_u32(o, UINT32_MAX);
		return;
	}
	if (n >= UINT32_MAX) {
		o->failed = true;
		return;
	}
	put_u32(o, (uint32_t)n);
	put(o, s, n);
	put(o, "", 1);
}

static void put_string(struct out *o, const char *s)
{
	put_bytes(o, s, s ? strlen(s) : 0);
}

/* argv and envp end with NULL; clean has a count */
static void put_list(struct out *o, const char *const *v, size_t n)
{
	if (v && n == SIZE_MAX)
		for (n = 0; v[n]; n++)
			;
	put_u32(o, v ? (uint32_t)n : 0);
	for (size_t i = 0; v && i < n; i++)
		put_string(o, v[i]);
}

static int flush(struct out *o, int fd, lb_error *err)
{
	int r = 0;
	if (o->failed)
		r = lb_fail(err, ENOMEM, "out of memory describing the job");
	else if (lb_write_all(fd, o->buf, o->len) < 0)
		r = lb_fail_sys(err, errno, "writing the job for llmbox-run");
	free(o->buf);
	return r;
}

int lb_chain_encode(int fd, pid_t parent, const lb_jail *j, const lb_run_spec *spec,
		    const lb_filter *filter, const struct child_fds *fds, const lb_cgroup *cg,
		    lb_error *err)
{
	struct out o = {0};
	int32_t pid = (int32_t)parent;
	put(&o, MAGIC, sizeof MAGIC);
	put(&o, &SIZES, sizeof SIZES);
	put(&o, &pid, sizeof pid);
	put(&o, j, sizeof *j);
	put(&o, fds, sizeof *fds);
	put(&o, cg, sizeof *cg);
	put(&o, &spec->limits, sizeof spec->limits);
	put_string(&o, spec->cwd);
	put_string(&o, spec->hosts);
	put_string(&o, spec->probe);
	put_list(&o, spec->argv, SIZE_MAX);
	put_list(&o, spec->envp, SIZE_MAX);
	put_list(&o, spec->clean, spec->n_clean);
	put_u32(&o, (uint32_t)spec->n_files);
	for (size_t i = 0; i < spec->n_files; i++) {
		const lb_file *f = &spec->files[i];
		uint64_t len = f->len;
		put_string(&o, f->path);
		put_u32(&o, f->mode);
		put(&o, &len, sizeof len);
		put(&o, f->data, f->len);
	}
	size_t prog_len = 0;
	const void *prog = filter ? lb_filter_program(filter, &prog_len) : NULL;
	put_u32(&o, (uint32_t)prog_len);
	put(&o, prog, prog_len);
	return flush(&o, fd, err);
}

int lb_jail_job_encode(int fd, pid_t parent, const lb_jail_config *cfg, int report_w, int sync_r,
		       lb_error *err)
{
	struct out o = {0};
	int32_t ids[3] = {(int32_t)parent, report_w, sync_r};
	uint64_t sizes[2] = {cfg->workspace_size, cfg->tmp_size};
	uint32_t host[2] = {(uint32_t)cfg->host_uid, (uint32_t)cfg->host_gid};
	put(&o, JAIL_MAGIC, sizeof JAIL_MAGIC);
	put(&o, ids, sizeof ids);
	put(&o, sizes, sizeof sizes);
	put(&o, host, sizeof host);
	put_string(&o, cfg->hostname);
	put_string(&o, cfg->hosts_extra);
	put_string(&o, cfg->rootfs);
	put_u32(&o, (uint32_t)cfg->n_ro);
	for (size_t i = 0; i < cfg->n_ro; i++) {
		unsigned char flags[2] = {cfg->ro[i].optional, cfg->ro[i].in_root};
		put_string(&o, cfg->ro[i].src);
		put_string(&o, cfg->ro[i].dst);
		put(&o, flags, sizeof flags);
	}
	return flush(&o, fd, err);
}

/* ---- reading: bounds-checked, strings in place ---- */

struct in {
	char *p, *end;
	bool bad;
};

static void *take(struct in *in, size_t n)
{
	if (in->bad || (size_t)(in->end - in->p) < n) {
		in->bad = true;
		return NULL;
	}
	char *p = in->p;
	in->p += n;
	return p;
}

static void get(struct in *in, void *dst, size_t n)
{
	void *p = take(in, n);
	if (p)
		memcpy(dst, p, n);
	else
		memset(dst, 0, n);
}

static uint32_t get_u32(struct in *in)
{
	uint32_t v;
	get(in, &v, sizeof v);
	return v;
}

static const char *get_bytes(struct in *in, size_t *len)
{
	uint32_t n = get_u32(in);
	*len = 0;
	if (in->bad || n == UINT32_MAX)
		return NULL;
	char *s = take(in, (size_t)n + 1);
	if (!s || s[n] != '\0') {
		in->bad = true;
		return NULL;
	}
	*len = n;
	return s;
}

static const char *get_string(struct in *in)
{
	size_t n;
	const char *s = get_bytes(in, &n);
	if (s && strlen(s) != n)
		in->bad = true; /* a NUL inside: the caller wrote a C string */
	return s;
}

/* A NULL-terminated array of the list's strings (malloc'd), its count in *n. */
static const char **get_list(struct in *in, size_t *n)
{
	uint32_t count = get_u32(in);
	/* each string takes at least 5 bytes: a count beyond what is left is a lie */
	if (in->bad || count > (size_t)(in->end - in->p) / 5) {
		in->bad = true;
		return NULL;
	}
	const char **v = calloc((size_t)count + 1, sizeof *v);
	if (!v) {
		in->bad = true;
		return NULL;
	}
	for (uint32_t i = 0; i < count; i++)
		if (!(v[i] = get_string(in)))
			in->bad = true;
	*n = count;
	return v;
}

static int decode_run(struct in *in, struct lb_chain_job *job, lb_error *err)
{
	struct sizes sizes;
	get(in, &sizes, sizeof sizes);
	if (in->bad || memcmp(&sizes, &SIZES, sizeof sizes))
		return lb_fail(err, EINVAL, "%s", ANOTHER_BUILD);
	int32_t parent;
	get(in, &parent, sizeof parent);
	job->parent = (pid_t)parent;
	get(in, &job->jail, sizeof job->jail);
	get(in, &job->fds, sizeof job->fds);
	get(in, &job->cg, sizeof job->cg);
	lb_run_spec *s = &job->spec;
	get(in, &s->limits, sizeof s->limits);
	s->cwd = get_string(in);
	s->hosts = get_string(in);
	s->probe = get_string(in);
	size_t n;
	s->argv = get_list(in, &n);
	s->envp = get_list(in, &n);
	s->clean = get_list(in, &s->n_clean);
	uint32_t n_files = get_u32(in);
	if (!in->bad && n_files <= (size_t)(in->end - in->p) / 17) {
		lb_file *files = calloc(n_files ? n_files : 1, sizeof *files);
		if (!files)
			return lb_fail(err, ENOMEM, "out of memory");
		s->files = files;
		s->n_files = n_files;
		for (uint32_t i = 0; i < n_files && !in->bad; i++) {
			uint64_t len;
			files[i].path = get_string(in);
			files[i].mode = get_u32(in);
			get(in, &len, sizeof len);
			files[i].data = take(in, (size_t)len);
			files[i].len = (size_t)len;
			if (!files[i].path || (len && !files[i].data))
				in->bad = true;
		}
	} else {
		in->bad = true;
	}
	uint32_t prog_len = get_u32(in);
	const void *prog = take(in, prog_len);
	if (in->bad || in->p != in->end || !s->argv || !s->argv[0] || !s->envp)
		return lb_fail(err, EINVAL, "a malformed run description");
	if (prog_len && !(job->filter = lb_filter_from_program(prog, prog_len, err)))
		return -1;
	return 0;
}

static int decode_jail(struct in *in, struct lb_jail_job *job, lb_error *err)
{
	int32_t ids[3];
	uint64_t sizes[2];
	uint32_t host[2];
	get(in, ids, sizeof ids);
	get(in, sizes, sizeof sizes);
	get(in, host, sizeof host);
	job->parent = (pid_t)ids[0];
	job->report_w = ids[1];
	job->sync_r = ids[2];
	lb_jail_config *c = &job->cfg;
	c->workspace_size = sizes[0];
	c->tmp_size = sizes[1];
	c->host_uid = (uid_t)host[0];
	c->host_gid = (gid_t)host[1];
	c->hostname = get_string(in);
	c->hosts_extra = get_string(in);
	c->rootfs = get_string(in);
	uint32_t n = get_u32(in);
	/* each mount takes at least 12 bytes */
	if (!in->bad && n <= (size_t)(in->end - in->p) / 12) {
		lb_mount *ro = calloc(n ? n : 1, sizeof *ro);
		if (!ro)
			return lb_fail(err, ENOMEM, "out of memory");
		c->ro = ro;
		c->n_ro = n;
		for (uint32_t i = 0; i < n && !in->bad; i++) {
			unsigned char flags[2];
			ro[i].src = get_string(in);
			ro[i].dst = get_string(in);
			get(in, flags, sizeof flags);
			ro[i].optional = flags[0] != 0;
			ro[i].in_root = flags[1] != 0;
			if (!ro[i].src || !ro[i].dst)
				in->bad = true;
		}
	} else {
		in->bad = true;
	}
	if (in->bad || in->p != in->end)
		return lb_fail(err, EINVAL, "a malformed jail description");
	return 0;
}

int lb_helper_job_decode(int fd, struct lb_helper_job *job, lb_error *err)
{
	memset(job, 0, sizeof *job);
	job->report_w = -1;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return lb_fail_sys(err, errno, "reading the job for llmbox-run");
	if (st.st_size <= 0 || (uint64_t)st.st_size > (1ULL << 32))
		return lb_fail(err, EINVAL, "a job of %lld bytes", (long long)st.st_size);
	size_t size = (size_t)st.st_size;
	char *buf = job->record = malloc(size);
	if (!buf)
		return lb_fail(err, ENOMEM, "out of memory");
	size_t got = 0;
	while (got < size) {
		ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return lb_fail_sys(err, r < 0 ? errno : EIO,
					   "reading the job for llmbox-run");
		got += (size_t)r;
	}
	struct in in = {buf, buf + size, false};
	if (size >= sizeof JAIL_MAGIC && !memcmp(buf, JAIL_MAGIC, sizeof JAIL_MAGIC)) {
		in.p += sizeof JAIL_MAGIC;
		job->is_jail = true;
		int r = decode_jail(&in, &job->jail, err);
		job->report_w = job->jail.report_w;
		return r;
	}
	if (size >= sizeof MAGIC && !memcmp(buf, MAGIC, sizeof MAGIC)) {
		in.p += sizeof MAGIC;
		int r = decode_run(&in, &job->run, err);
		job->report_w = job->run.fds.report_w;
		return r;
	}
	return lb_fail(err, EINVAL, "%s", ANOTHER_BUILD);
}

void lb_helper_job_free(struct lb_helper_job *job)
{
	lb_run_spec *s = &job->run.spec;
	free((void *)s->argv);
	free((void *)s->envp);
	free((void *)s->clean);
	free((void *)s->files);
	lb_filter_free(job->run.filter);
	free((void *)job->jail.cfg.ro);
	free(job->record);
	memset(job, 0, sizeof *job);
}
