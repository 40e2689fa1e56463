/* Interactive cells: the words an interactive program's control socket carries (fd 3), and the
 * parsing of its answers, which are untrusted: the program that writes them runs the user's code.
 *
 *   llmbox -> program   "cell TAG LEN\n" then LEN bytes of code   (one cell)
 *                       "I\n"                                      (interrupt the cell)
 *   program -> llmbox   "R"                                        (once, when ready)
 *                       "done TAG STATUS CPU_US PLOTS LEN\n" then LEN bytes: the cell's
 *                       value; PLOTS is 1 when the plots directory has files
 *
 * TAG is llmbox's, new for each cell: an answer with another tag (a late one, or one the program
 * wrote for a cell that is over) is dropped, so no answer can end a later cell.
 *
 * Also here, a cell's own steps of the supervision (supervise.c runs the rest): the interrupt, the
 * answer, and the end that gives the pending run back alive. */
#include "supervision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Longest header line accepted; a longer one is malformed. */
#define HEADER_MAX 200

long lb_cell_parse(const char *buf, size_t len, const char *tag, struct lb_cell_answer *out)
{
	memset(out, 0, sizeof *out);
	const char *nl = memchr(buf, '\n', len < HEADER_MAX ? len : HEADER_MAX);
	if (!nl)
		return len >= HEADER_MAX ? -1 : 0;
	char line[HEADER_MAX + 1];
	size_t hl = (size_t)(nl - buf);
	memcpy(line, buf, hl);
	line[hl] = '\0';
	if (strlen(line) != hl) /* a NUL inside the header */
		return -1;
	char t[64];
	int status, plots, n = 0;
	unsigned long long cpu, vlen;
	if (sscanf(line, "done %63s %d %llu %d %llu%n", t, &status, &cpu, &plots, &vlen, &n) != 5 ||
	    (size_t)n != hl || status < 0 || status > 255 || (plots != 0 && plots != 1) ||
	    vlen > LB_CELL_VALUE_MAX)
		return -1;
	size_t need = hl + 1 + (size_t)vlen;
	if (len < need)
		return 0;
	out->matches = strcmp(t, tag) == 0;
	out->status = status;
	out->cpu_us = cpu;
	out->plots = plots == 1;
	out->value = buf + hl + 1;
	out->value_len = (size_t)vlen;
	return (long)need;
}

/* A cell over its time or output: the program is asked to interrupt it (KeyboardInterrupt in
 * Python), and has `grace` more before the whole run is stopped. */
void lb_cell_interrupt(struct supervision *s, enum lb_limit limit)
{
	if (s->interrupted)
		return;
	s->interrupted = true;
	s->cell_limit = limit;
	double grace = s->io->grace > 0 ? s->io->grace : 2;
	s->deadline = lb_now_ms() + grace * 1e3;
	if (s->fd[FD_CTL] < 0 || send(s->fd[FD_CTL], "I\n", 2, MSG_NOSIGNAL) != 2)
		lb_sup_stop_for(s, limit);
}

/* At most this many reads of each stream when a cell's answer comes: a pipe holds 64 KiB. */
#define DRAIN_READS 16

/* The program's answers to a cell. Its output was written before its answer, so it is in the
 * pipes now: read to their current end (the fds are non-blocking for cells), and the cell is
 * over. An answer with another tag is dropped; a malformed one stops the run. */
void lb_cell_read_answer(struct supervision *s)
{
	char chunk[4096];
	ssize_t r = read(s->fd[FD_CTL], chunk, sizeof chunk);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		lb_close_fd(&s->fd[FD_CTL]); /* the program is going: its status says how */
		return;
	}
	if (lb_buf_append(&s->ctl_in, chunk, (size_t)r) < 0) {
		lb_sup_abort_run(s, ENOMEM, "out of memory for the cell's answer");
		return;
	}
	size_t off = 0;
	while (!s->cell_done) {
		struct lb_cell_answer a;
		long n = lb_cell_parse(s->ctl_in.data + off, s->ctl_in.len - off, s->io->cell_tag,
				       &a);
		if (n == 0)
			break;
		if (n < 0) {
			lb_sup_abort_run(s, EPROTO, "the interactive program broke its protocol");
			return;
		}
		off += (size_t)n;
		if (!a.matches)
			continue;
		if (a.value_len && lb_buf_append(&s->value, a.value, a.value_len) < 0) {
			lb_sup_abort_run(s, ENOMEM, "out of memory for the cell's value");
			return;
		}
		s->cell_status = a.status;
		s->cell_cpu_us = a.cpu_us;
		s->res->probe_found = a.plots;
		/* bounded: a thread of the program that goes on writing must not keep the
		 * supervisor here (what it writes later belongs to the next cell) */
		for (int i = FD_OUT; i <= FD_ERR; i++)
			for (int k = 0;
			     k < DRAIN_READS && s->fd[i] >= 0 && lb_sup_read_output(s, i) > 0; k++)
				;
		lb_sup_flush_held(s);
		lb_sup_stream_out(s, FD_OUT, true);
		lb_sup_stream_out(s, FD_ERR, true);
		s->cell_done = true;
	}
	memmove(s->ctl_in.data, s->ctl_in.data + off, s->ctl_in.len - off);
	s->ctl_in.len -= off;
}

/* A cell that ended with its program alive: the result, and the fds back to the pending run. */
int lb_cell_end(lb_active *a, lb_result *res)
{
	struct supervision *s = &a->s;
	lb_pending *p = s->p;
	int *owned[N_FDS] = {&p->out, &p->err, &p->status, &p->in, &p->ctl};
	for (int i = 0; i < N_FDS; i++)
		*owned[i] = s->fd[i];
	lb_cgroup_usage usage;
	lb_cgroup_read(&p->cg, &usage);
	*res = a->res;
	res->exit_code = s->cell_status;
	res->limit = s->cell_limit;
	res->interrupted = s->interrupted;
	res->duration_ms = lb_now_ms() - p->start;
	res->cpu_ms = (double)s->cell_cpu_us / 1e3;
	res->max_rss = usage.peak;
	res->out = lb_sup_take_buf(&s->out[0], &res->out_len);
	res->err = lb_sup_take_buf(&s->out[1], &res->err_len);
	res->value = s->value.data;
	res->value_len = s->value.len;
	free(s->ctl_in.data);
	free(a);
	return 0;
}
