/* What the supervision of a run (supervise.c) shares with the supervision of interactive cells
 * (cell.c), and nothing else includes. */
#ifndef LLMBOX_SUPERVISION_H
#define LLMBOX_SUPERVISION_H

#include "run.h"

#include <sys/types.h>

struct buf {
	char *data;
	size_t len, cap;
};

enum { FD_OUT, FD_ERR, FD_STATUS, FD_IN, FD_CTL, N_FDS };

/* Streamed output reaches on_output in whole lines where it can. Programs often write a line in
 * pieces (python -u writes the text, then "\n"), and a caller that copies each chunk to a shared
 * pipe (parallel `llmbox run | ...`) would interleave half lines. So a chunk is handed on up to
 * its last newline, and the partial line after it waits for its end at most LINE_WAIT_MS (a
 * prompt without a newline is not held back noticeably; 20 ms proved too short for a loaded
 * 2-core machine, where a print's two writes can be that far apart) or until LINE_HOLD_MAX
 * bytes. Only the chunking changes: the stored output, the limits and the order of bytes are
 * the same. */
#define LINE_WAIT_MS  50
#define LINE_HOLD_MAX 65536

struct stream_state {
	size_t sent;	   /* bytes of the stream's buffer handed to on_output */
	double held_since; /* when the oldest byte not yet handed on arrived; 0: none */
};

/* pids.events is read at most this often while a run goes on, not on every chunk of output. */
#define PIDS_CHECK_MS 100

struct supervision {
	lb_pending *p;
	const lb_run_io *io;
	lb_result *res;
	lb_error *err;
	int fd[N_FDS]; /* the host's ends, taken over from p; -1 once closed */
	struct buf out[2];
	struct stream_state streams[2];
	double deadline; /* 0: none */
	uint64_t max_output, total_out;
	size_t stdin_off;
	double pids_checked;
	bool aborted; /* the caller's side failed: err is filled */
	struct run_outcome o;
	char report_line[128];
	size_t report_len;
	/* interactive cells (io->cell_tag): the run goes on after the cell's answer */
	bool cell, cell_done, interrupted;
	int cell_status;
	unsigned long long cell_cpu_us;
	enum lb_limit cell_limit; /* what interrupted the cell */
	struct buf ctl_in;	  /* the program's answers, as they come */
	struct buf value;
};

/* A run being supervised. It owns its pending run and its output until lb_active_end. */
struct lb_active {
	struct supervision s;
	lb_run_io io; /* a copy; what it points to stays the caller's until lb_active_end */
	lb_error err;
	lb_result res;
	bool over; /* nothing left to step: the result can be made */
};

int lb_buf_append(struct buf *b, const char *p, size_t n);

/* supervise.c: the steps a cell's supervision shares with a run's */
void lb_sup_stop_for(struct supervision *s, enum lb_limit limit);
void lb_sup_abort_run(struct supervision *s, int code, const char *msg);
void lb_sup_stream_out(struct supervision *s, int i, bool all);
void lb_sup_flush_held(struct supervision *s);
/* > 0: bytes read; 0: the stream ended; -1: nothing to read now */
ssize_t lb_sup_read_output(struct supervision *s, int i);
char *lb_sup_take_buf(struct buf *b, size_t *len);

/* cell.c: a cell's own steps */
void lb_cell_interrupt(struct supervision *s, enum lb_limit limit);
void lb_cell_read_answer(struct supervision *s);
/* A cell that ended with its program alive: its result, and the fds back to the pending run. */
int lb_cell_end(lb_active *a, lb_result *res);

#endif
