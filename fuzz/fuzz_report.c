/* Fuzz target "report": lb_read_report, the reader of the lb_error records that forked children
 * send over a pipe ("the sandbox broke" and progress records).
 *
 * The input is written to a pipe in fuzzed chunk sizes and read back record by record. What must
 * hold: every whole record comes back byte for byte (code and message) with its message
 * NUL-terminated inside the buffer, a trailing short record is never returned, and reading stops
 * at end of file. */
#define _GNU_SOURCE
#include "../runtime/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Pipes hold 64 KiB: everything is written before reading, so stay below that. */
	if (size < 1 || size > 60000)
		return 0;
	size_t chunk = (size_t)data[0] * 7 + 1;
	data++;
	size--;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		abort();
	for (size_t off = 0; off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		if (lb_write_all(p[1], data + off, n) < 0)
			abort();
	}
	close(p[1]);

	size_t whole = size / sizeof(lb_error), got = 0;
	lb_error e;
	for (;;) {
		memset(&e, 0xa5, sizeof e);
		/* Every other call passes err = NULL, which must only consume the record. */
		bool want = got % 2 == 0;
		int r = lb_read_report(p[0], want ? &e : NULL);
		if (r == 0)
			break;
		if (r != 1 || got >= whole) {
			fprintf(stderr, "record %zu of %zu returned %d\n", got, whole, r);
			abort();
		}
		if (want) {
			const uint8_t *rec = data + got * sizeof e;
			if (memcmp(&e.code, rec, sizeof e.code) ||
			    memcmp(e.msg, rec + sizeof e.code, sizeof e.msg - 1) ||
			    e.msg[sizeof e.msg - 1] != '\0' || strlen(e.msg) >= sizeof e.msg) {
				fprintf(stderr, "record %zu misread\n", got);
				abort();
			}
		}
		got++;
	}
	if (got != whole) {
		fprintf(stderr, "read %zu records of %zu\n", got, whole);
		abort();
	}
	/* At end of file the reader keeps saying so. */
	if (lb_read_report(p[0], &e) != 0)
		abort();
	close(p[0]);
	return 0;
}
