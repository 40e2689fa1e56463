/* Shared by the fuzz harnesses. */
#ifndef LLMBOX_FUZZ_HARNESS_H
#define LLMBOX_FUZZ_HARNESS_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* LB_FUZZ_SKIP_KNOWN=1 skips every known bug a harness lists, or a comma-separated list of
 * names: lets the fuzzers look for new bugs while an old one is open. */
static inline bool skip_known_bug(const char *name)
{
	const char *s = getenv("LB_FUZZ_SKIP_KNOWN");
	return s && (!strcmp(s, "1") || strstr(s, name));
}

/* A sanitizer report is a failure, also when a crash file is replayed by hand. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1";
}

#endif
