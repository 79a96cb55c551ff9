/* SPDX-License-Identifier: MIT */
/*
 * kbuf.h - for the tests of kernel-resident buffers that look inside the
 * ring (they include the library's internal headers): how many of the
 * bytes a pagepipe holds stay in its private kernel pipe.
 */
#ifndef PP_TEST_KBUF_H
#define PP_TEST_KBUF_H

#include "internal.h"

/* Bytes in kernel-resident buffers, and how many buffers (nbufs, or NULL). */
static inline size_t t_kernel_bytes(struct pp_file *w, unsigned int *nbufs)
{
	struct pp_pipe *p = w->pipe;
	unsigned int nb = 0;
	size_t n = 0;

	for (unsigned int i = p->tail; i != p->head; i++) {
		if (pp__pipe_buf(p, i)->ops == &pp__kernel_buf_ops) {
			n += pp__pipe_buf(p, i)->len;
			nb++;
		}
	}
	if (nbufs)
		*nbufs = nb;
	return n;
}

#endif /* PP_TEST_KBUF_H */
