// SPDX-License-Identifier: MIT
/*
 * zerocopy.c - a read that lends the pipe's memory instead of copying it.
 *
 * pp_read_lend() snapshots the buffers at the tail and hands out iovecs
 * pointing into their pages; pp_read_done() consumes what the reader used.
 * The consumer lock is held in between, so nobody else takes those
 * buffers, while writers go on filling the rest of the ring.  (The by-
 * reference write, pp_write_ref(), is in vmsplice.c with its sibling.)
 *
 * Lent memory is read-only.  A buffer whose bytes are not addressable (a
 * file's pages) is read into a scratch page first: that is a copy, the one
 * a read() would make.
 */
#include "internal.h"

#include <stdlib.h>

#define LOAN_MAX	64u

struct pp__loan {
	bool active;
	struct pp_file *owner;		/* the read end the loan was made on */
	unsigned int nr;
	size_t lent;
	struct pp_buf snap[LOAN_MAX];
	void *mapped[LOAN_MAX];
	void *scratch[LOAN_MAX];
};

void pp__loan_free(struct pp__loan *loan)
{
	free(loan);
}

static void loan_unmap(struct pp_pipe *p, struct pp__loan *loan)
{
	for (unsigned int i = 0; i < loan->nr; i++) {
		if (loan->mapped[i])
			pp__buf_unmap(p, &loan->snap[i], loan->mapped[i]);
		if (loan->scratch[i])
			pp__page_put(NULL, loan->scratch[i]);
		loan->mapped[i] = loan->scratch[i] = NULL;
	}
	loan->nr = 0;
	loan->lent = 0;
	loan->active = false;
}

/*
 * A buffer whose data is gone (ENODATA) is reported once and dropped, as
 * pp_read() does, so that the next loan goes on to what follows.
 */
static ssize_t do_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count)
{
	struct pp_pipe *p = f->pipe;
	bool nonblock = pp__file_flags(f) & O_NONBLOCK;
	struct pp__loan *loan;
	struct pp__dead dead;
	unsigned int nr, n = 0;
	size_t lent = 0;
	int err;

	pp__dead_init(&dead);
	err = pp__pipe_lock_consumer(p, nonblock);
	if (err)
		return err;
	if (!p->loan) {
		p->loan = calloc(1, sizeof(*p->loan));
		if (!p->loan) {
			pp__pipe_unlock_consumer(p);
			return -ENOMEM;
		}
	}
	loan = p->loan;

	for (;;) {
		while (pp__pipe_empty(p)) {
			pp__pipe_unlock_consumer(p);
			err = pp__pipe_wait_data(p, nonblock);
			if (err <= 0)
				return err;
			err = pp__pipe_lock_consumer(p, nonblock);
			if (err)
				return err;
		}
		/* Kernel-resident bytes are lent from pages they are read into (kbuf.c). */
		err = pp__kbuf_materialize(p, count,
					   min_t(unsigned int, (unsigned int)iovcnt, LOAN_MAX));
		if (err) {
			pp__pipe_unlock_consumer(p);
			pp__pipe_release_dead(p, &dead);
			return err;
		}
		nr = pp__pipe_snapshot(p, loan->snap,
				       min_t(unsigned int, (unsigned int)iovcnt, LOAN_MAX), count, true);
		/* Empty slots at the front: retire them and look again. */
		while (n < nr && !loan->snap[n].len)
			n++;
		if (n == nr) {
			pp__pipe_consume(p, 0, true, &dead);
			n = 0;
			continue;
		}
		break;
	}

	for (unsigned int k = 0; n < nr && lent < count; n++) {
		struct pp_buf *buf = &loan->snap[n];
		size_t len = min_t(size_t, buf->len, count - lent);
		void *addr;

		loan->mapped[n] = loan->scratch[n] = NULL;
		if (!len)
			continue;
		err = pp__buf_confirm(p, buf);
		if (err)
			break;
		if (pp__buf_class(buf) == PP_BUF_MEMORY) {
			addr = (char *)buf->page + buf->offset;
		} else if (pp__buf_class(buf) == PP_BUF_FILE) {
			ssize_t r;

			loan->scratch[n] = pp__page_alloc(NULL);
			if (!loan->scratch[n]) {
				err = -ENOMEM;
				break;
			}
			r = pp__buf_copy_out(p, buf, 0, loan->scratch[n], len);
			if (r <= 0) {
				pp__page_put(NULL, loan->scratch[n]);
				loan->scratch[n] = NULL;
				err = r ? (int)r : -ENODATA;
				break;
			}
			len = (size_t)r;
			addr = loan->scratch[n];
		} else {
			loan->mapped[n] = pp__buf_map(p, buf);
			if (!loan->mapped[n]) {
				err = -EIO;
				break;
			}
			addr = (char *)loan->mapped[n] + buf->offset;
		}
		iov[k++] = (struct iovec){ addr, len };
		lent += len;
		if (buf->flags & PP_BUF_FLAG_PACKET) {
			n++;
			break;
		}
	}
	loan->nr = n;
	loan->lent = lent;
	if (!lent) {
		loan_unmap(p, loan);
		if (err == -ENODATA)
			pp__pipe_consume(p, loan->snap[n].len, false, &dead);
		pp__pipe_unlock_consumer(p);
		pp__pipe_release_dead(p, &dead);
		return err ? err : -EIO;
	}
	loan->owner = f;
	/* Atomic: a FIONREAD or resize in another thread compares it unlocked. */
	__atomic_store_n(&p->loan_owner, pthread_self(), __ATOMIC_RELAXED);
	__atomic_store_n(&p->loan_active, true, __ATOMIC_RELEASE);
	loan->active = true;
	/* Zero-length slots ahead of the loan were retired before it. */
	pp__pipe_release_dead(p, &dead);
	return (ssize_t)lent;	/* the consumer lock stays held until pp_read_done() */
}

PP_EXPORT ssize_t pp_read_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count)
{
	ssize_t r;

	if (!f)
		return pp__ret(-EBADF);
	if (!pp__is_pagepipe(f))
		return pp__ret(-EINVAL);
	if (!pp__file_readable(f))
		return pp__ret(-EBADF);
	if (iovcnt <= 0 || iovcnt > PP_IOV_MAX)
		return pp__ret(-EINVAL);
	if (!iov)
		return pp__ret(-EFAULT);
	if (!count)
		return 0;
	pp__file_get(f);
	if (pp__is_shared(f))
		r = pp__shared_read_lend(f, iov, min_t(int, iovcnt, (int)LOAN_MAX),
					 min_t(size_t, count, PP_MAX_RW));
	else
		r = do_lend(f, iov, iovcnt, min_t(size_t, count, PP_MAX_RW));
	if (r <= 0)
		pp__file_put(f);	/* a loan keeps its reference until done */
	return pp__ret(r);
}

PP_EXPORT int pp_read_done(struct pp_file *f, size_t consumed)
{
	struct pp__dead dead;
	struct pp_pipe *p;
	struct pp__loan *loan;

	if (!f)
		return (int)pp__ret(-EBADF);
	if (!pp__is_pagepipe(f))
		return (int)pp__ret(-EINVAL);
	if (!pp__file_readable(f))
		return (int)pp__ret(-EBADF);	/* the write end has no loan to end */
	if (pp__is_shared(f)) {
		int err = pp__shared_read_done(f, consumed);

		if (!err)
			pp__file_put(f);	/* the loan's */
		return (int)pp__ret(err);
	}
	p = f->pipe;
	loan = p->loan;
	if (!__atomic_load_n(&p->loan_active, __ATOMIC_ACQUIRE) || !loan || !loan->active ||
	    loan->owner != f)
		return (int)pp__ret(-EINVAL);
	consumed = min_t(size_t, consumed, loan->lent);

	pp__dead_init(&dead);
	pp__pipe_consume(p, consumed, true, &dead);
	loan_unmap(p, loan);
	loan->owner = NULL;
	__atomic_store_n(&p->loan_active, false, __ATOMIC_RELEASE);
	pp__pipe_unlock_consumer(p);
	pp__pipe_release_dead(p, &dead);
	pp__file_put(f);
	return 0;
}

/* ---------------------------------------------------------------------- */
/*
 * A write that fills the pipe's own pages in place: pp_write_lend() lends
 * pages for free slots with the producer lock held, pp_write_done()
 * pushes the filled ones as whole slots and lets the lock go.  What a
 * writer that builds its message in place saves is the copy write()
 * makes; for a shared pipe the pages are the arena's (shared.c), the one
 * memory a reader in another process can see, so this is its zero-copy
 * write.
 */
struct pp__lease {
	bool active;
	struct pp_file *owner;		/* the write end the lease was made on */
	unsigned int nr;
	size_t lent;
	void *pages[PP_LEASE_MAX];
};

void pp__lease_free(struct pp__lease *lease)
{
	free(lease);
}

static ssize_t do_write_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count)
{
	struct pp_pipe *p = f->pipe;
	bool nonblock = pp__file_flags(f) & O_NONBLOCK;
	unsigned int want = (unsigned int)min_t(size_t, min_t(size_t, (size_t)iovcnt, PP_LEASE_MAX),
						(count + pp__page_size - 1) / pp__page_size);
	struct pp__lease *lease;
	unsigned int room, n;
	size_t left = count;
	int err;

	pp__pipe_lock_producer(p);
	for (;;) {
		if (!pp__pipe_readers(p)) {
			err = pp__pipe_epipe(f);
			goto fail;
		}
		if (!pp__pipe_full(p))
			break;
		pp__pipe_unlock_producer(p);
		err = pp__pipe_wait_room(f, nonblock);
		pp__pipe_lock_producer(p);
		if (err)
			goto fail;
	}
	if (!p->lease && !(p->lease = calloc(1, sizeof(*p->lease)))) {
		err = -ENOMEM;
		goto fail;
	}
	lease = p->lease;
	room = pp__pipe_max_usage(p) - pp__pipe_occupancy(p);
	want = min_t(unsigned int, want, room);
	for (n = 0; n < want; n++) {
		size_t l = min_t(size_t, left, pp__page_size);

		lease->pages[n] = pp__page_alloc(p);
		if (!lease->pages[n])
			break;
		iov[n] = (struct iovec){ lease->pages[n], l };
		left -= l;
	}
	if (!n) {
		err = -ENOMEM;
		goto fail;
	}
	lease->nr = n;
	lease->lent = count - left;
	lease->owner = f;
	lease->active = true;
	return (ssize_t)lease->lent;	/* the producer lock stays held until pp_write_done() */
fail:
	pp__pipe_unlock_producer(p);
	return err;
}

static int do_write_done(struct pp_file *f, size_t filled)
{
	struct pp_pipe *p = f->pipe;
	struct pp__lease *lease = p->lease;
	/* An O_DIRECT end's pages go as packets, a page each, as write() sends them. */
	unsigned int flags = (pp__file_flags(f) & O_DIRECT) ? PP_BUF_FLAG_PACKET : 0;
	size_t pushed = 0;

	/* Only the lease holder can have set active, and it holds wr_mutex: no race. */
	if (!lease || !lease->active || lease->owner != f)
		return -EINVAL;

	filled = min_t(size_t, filled, lease->lent);
	for (unsigned int i = 0; i < lease->nr; i++) {
		size_t l = min_t(size_t, filled, pp__page_size);
		struct pp_buf buf = { .page = lease->pages[i], .len = (unsigned int)l,
				      .ops = &pp_anon_buf_ops, .flags = flags };

		if (!l) {
			pp__page_free(p, lease->pages[i]);
			continue;
		}
		/* Not CAN_MERGE: the writer may still hold the address; nothing appends to it. */
		pp__pipe_push(p, &buf);
		filled -= l;
		pushed += l;
	}
	lease->active = false;
	lease->owner = NULL;
	pp__pipe_unlock_producer(p);
	if (pushed)
		pp__pipe_wake_readers(p);
	return 0;
}

PP_EXPORT ssize_t pp_write_lend(struct pp_file *f, struct iovec *iov, int iovcnt, size_t count)
{
	ssize_t r;

	if (!f)
		return pp__ret(-EBADF);
	if (!pp__is_pagepipe(f))
		return pp__ret(-EINVAL);
	if (!pp__file_writable(f))
		return pp__ret(-EBADF);
	if (iovcnt <= 0 || iovcnt > PP_IOV_MAX)
		return pp__ret(-EINVAL);
	if (!iov)
		return pp__ret(-EFAULT);
	if (!count)
		return 0;
	count = min_t(size_t, count, PP_MAX_RW);
	pp__file_get(f);
	if (pp__is_shared(f))
		r = pp__shared_write_lend(f, iov, iovcnt, count);
	else
		r = do_write_lend(f, iov, iovcnt, count);
	if (r <= 0)
		pp__file_put(f);	/* a lease keeps its reference until done */
	return pp__ret(r);
}

PP_EXPORT int pp_write_done(struct pp_file *f, size_t filled)
{
	int err;

	if (!f)
		return (int)pp__ret(-EBADF);
	if (!pp__is_pagepipe(f))
		return (int)pp__ret(-EINVAL);
	if (!pp__file_writable(f))
		return (int)pp__ret(-EBADF);
	err = pp__is_shared(f) ? pp__shared_write_done(f, filled) : do_write_done(f, filled);
	if (!err)
		pp__file_put(f);	/* the lease's */
	return (int)pp__ret(err);
}
