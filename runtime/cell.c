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
 * wrote for a cell that is over) is dropped, so no answer can end a later cell. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
