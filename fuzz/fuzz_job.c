/* Fuzz target "job": lb_helper_job_decode, llmbox-run's reader of the job the library hands it
 * in a memfd (runtime/chain_wire.c). Its input comes from the library of the same build, but
 * the reader is bounds-checked all the same, and here it meets arbitrary records.
 *
 * The input's first byte picks a run's job (even) or a jail's (odd); the harness puts that
 * kind's magic, and for a run the struct sizes, in front of the rest. What must hold: no read
 * outside the record and nothing leaked, decoded or refused; a refusal says why; a run's job
 * that decodes encodes back to the same bytes, and a jail's to a record that decodes and
 * encodes to itself (its two flags are read as booleans, so 2 comes back as 1). */
#include "../runtime/chain_wire.c"

#include <stdio.h>
#include <sys/mman.h>
#include "harness.h"

static int memfd_with(const void *p, size_t n)
{
	int fd = memfd_create("llmbox-fuzz-job", MFD_CLOEXEC);
	if (fd < 0 || lb_write_all(fd, p, n) < 0)
		abort();
	return fd;
}

/* The whole of fd's contents (malloc'd), its size in *n. */
static char *contents(int fd, size_t *n)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		abort();
	*n = (size_t)st.st_size;
	char *b = malloc(*n ? *n : 1);
	if (!b || pread(fd, b, *n, 0) != (ssize_t)*n)
		abort();
	return b;
}

/* The job encoded again, as the library would write it. */
static char *encode(const struct lb_helper_job *job, size_t *n)
{
	int fd = memfd_create("llmbox-fuzz-job", MFD_CLOEXEC);
	lb_error e;
	const struct lb_chain_job *r = &job->run;
	const struct lb_jail_job *jj = &job->jail;
	int rc = job->is_jail ? lb_jail_job_encode(fd, jj->parent, &jj->cfg, jj->report_w,
						   jj->sync_r, &e)
			      : lb_chain_encode(fd, r->parent, &r->jail, &r->spec, r->filter,
						&r->fds, &r->cg, &e);
	if (fd < 0 || rc < 0) {
		fprintf(stderr, "a decoded job does not encode: %s\n", e.msg);
		abort();
	}
	char *b = contents(fd, n);
	close(fd);
	return b;
}

static bool decode(const void *p, size_t n, struct lb_helper_job *job, lb_error *e)
{
	int fd = memfd_with(p, n);
	memset(e, 0xa5, sizeof *e);
	int rc = lb_helper_job_decode(fd, job, e);
	close(fd);
	if (rc < 0 && (!memchr(e->msg, '\0', sizeof e->msg) || !e->msg[0])) {
		fprintf(stderr, "a refusal without a message\n");
		abort();
	}
	return rc == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 20))
		return 0;
	bool jail = data[0] & 1;
	struct out o = {0};
	if (jail) {
		put(&o, JAIL_MAGIC, sizeof JAIL_MAGIC);
	} else {
		put(&o, MAGIC, sizeof MAGIC);
		put(&o, &SIZES, sizeof SIZES);
	}
	put(&o, data + 1, size - 1);
	if (o.failed)
		abort();

	struct lb_helper_job job;
	lb_error e;
	if (decode(o.buf, o.len, &job, &e)) {
		if (job.is_jail != jail)
			abort();
		size_t n;
		char *again = encode(&job, &n);
		if (!jail && (n != o.len || memcmp(again, o.buf, n))) {
			fprintf(stderr, "a run's job encodes back to other bytes\n");
			abort();
		}
		if (jail) {
			struct lb_helper_job job2;
			if (!decode(again, n, &job2, &e)) {
				fprintf(stderr, "a jail's job, encoded again, is refused: %s\n",
					e.msg);
				abort();
			}
			size_t n2;
			char *third = encode(&job2, &n2);
			if (n2 != n || memcmp(third, again, n)) {
				fprintf(stderr, "a jail's job does not settle after one round\n");
				abort();
			}
			free(third);
			lb_helper_job_free(&job2);
		}
		free(again);
	}
	lb_helper_job_free(&job);
	free(o.buf);
	return 0;
}
