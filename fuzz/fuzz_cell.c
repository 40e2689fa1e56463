/* Fuzz target "cell": lb_cell_parse, the reader of an interactive program's answers to its cells
 * (untrusted: the program that writes them runs the user's code).
 *
 * The input is parsed answer by answer, as the supervisor does, against a fixed tag. What must
 * hold: a parse never reads past the buffer (ASan), a whole answer's length covers its header
 * and value, the value lies inside the buffer, bounded by LB_CELL_VALUE_MAX, and the status is a
 * byte; "more needed" (0) only when no newline came within the header's bound. */
#define _GNU_SOURCE
#include "../runtime/internal.h"

#include <stdio.h>
#include <string.h>
#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy exactly as long as the input: ASan sees any read past it */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		abort();
	memcpy(buf, data, size);
	size_t off = 0;
	while (off < size) {
		struct lb_cell_answer a;
		long n = lb_cell_parse(buf + off, size - off, "t0", &a);
		if (n <= 0)
			break;
		if ((size_t)n > size - off || a.status < 0 || a.status > 255 ||
		    a.value_len > LB_CELL_VALUE_MAX || a.value < buf + off ||
		    a.value + a.value_len != buf + off + n) {
			fprintf(stderr, "answer at %zu: length %ld, value %zu bytes\n", off, n,
				a.value_len);
			abort();
		}
		off += (size_t)n;
	}
	free(buf);
	return 0;
}
