// SPDX-License-Identifier: MIT
/*
 * user_buf.c - buffers that refer to the caller's memory: vmsplice() and
 * pp_write_ref().
 *
 * vmsplice() queues the caller's pages by reference with no completion
 * notice, exactly as Linux does: the memory must stay valid and unchanged
 * until the data has been consumed (SPLICE_F_GIFT promises the caller will
 * not touch it again).  pp_write_ref() adds what Linux lacks: a release
 * callback run when the last buffer referring to the memory goes.
 * User buffers are never mergeable: the pipe does not own the memory.
 */
#include "internal.h"

#include <stdlib.h>

struct user_ref {
	atomic_uint refs;
	pp_release_fn release;
	void *base;
	size_t count;
	void *arg;
};

void *pp__user_ref_new(pp_release_fn release, void *base, void *arg)
{
	struct user_ref *ref;

	if (pp__fault(PP_FAULT_ALLOC))
		return NULL;
	ref = malloc(sizeof(*ref));
	if (!ref)
		return NULL;
	*ref = (struct user_ref){ .release = release, .base = base, .arg = arg };
	atomic_init(&ref->refs, 1);
	return ref;
}

/*
 * Once queued: how much was taken.  The creator still holds its own
 * reference then, so no release can read the count before it is set.
 */
void pp__user_ref_set_count(void *ref, size_t count)
{
	((struct user_ref *)ref)->count = count;
}

void pp__user_ref_put(void *ref)
{
	struct user_ref *u = ref;

	if (atomic_fetch_sub_explicit(&u->refs, 1, memory_order_acq_rel) == 1) {
		if (u->release && u->count)
			u->release(u->base, u->count, u->arg);
		free(u);
	}
}

static void user_buf_release(struct pp_pipe *p, struct pp_buf *buf)
{
	(void)p;
	if (buf->private)
		pp__user_ref_put(buf->private);
}

static bool user_buf_get(struct pp_pipe *p, struct pp_buf *buf)
{
	struct user_ref *u = buf->private;
	unsigned int old;

	(void)p;
	if (!u)
		return true;	/* plain vmsplice: the caller answers for the memory */
	old = atomic_load_explicit(&u->refs, memory_order_relaxed);
	do {
		if (old >= pp__page_ref_max)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&u->refs, &old, old + 1,
							memory_order_relaxed,
							memory_order_relaxed));
	return true;
}

/* Stealing a user page means nothing in one address space: never. */
const struct pp_buf_ops pp__user_buf_ops = {
	.release	= user_buf_release,
	.get		= user_buf_get,
	.name		= "user",
};
