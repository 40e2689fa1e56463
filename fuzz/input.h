/* The fuzzer's input, read a byte at a time (0 once it is used up): shared by the harnesses
 * that build their inputs from it (seccomp, resolve, tar, layer). */
#ifndef LLMBOX_FUZZ_INPUT_H
#define LLMBOX_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct in {
	const uint8_t *p;
	size_t n;
};

static inline unsigned u8(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

#endif
