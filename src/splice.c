// SPDX-License-Identifier: MIT
/* splice.c - placeholder until the splice work lands: the calls exist, nothing moves yet. */
#include "internal.h"

PP_EXPORT ssize_t pp_splice(struct pp_file *in, off_t *off_in, struct pp_file *out,
			    off_t *off_out, size_t len, unsigned int flags)
{
	(void)in; (void)off_in; (void)out; (void)off_out; (void)len; (void)flags;
	return pp__ret(-ENOSYS);
}

PP_EXPORT ssize_t pp_tee(struct pp_file *in, struct pp_file *out, size_t len, unsigned int flags)
{
	(void)in; (void)out; (void)len; (void)flags;
	return pp__ret(-ENOSYS);
}

PP_EXPORT ssize_t pp_vmsplice(struct pp_file *f, const struct iovec *iov, size_t nr_segs,
			      unsigned int flags)
{
	(void)f; (void)iov; (void)nr_segs; (void)flags;
	return pp__ret(-ENOSYS);
}

const struct pp_file_ops pp__reg_ops = { .readv = pp__fd_readv, .writev = pp__fd_writev, .poll = pp__fd_poll, .release = pp__fd_release };
const struct pp_file_ops pp__fifo_ops = { .readv = pp__fd_readv, .writev = pp__fd_writev, .poll = pp__fd_poll, .release = pp__fd_release };
const struct pp_file_ops pp__sock_ops = { .readv = pp__fd_readv, .writev = pp__fd_writev, .poll = pp__fd_poll, .release = pp__fd_release };
const struct pp_file_ops pp__chr_ops = { .readv = pp__fd_readv, .writev = pp__fd_writev, .poll = pp__fd_poll, .release = pp__fd_release };
struct pp__file_ref *pp__file_ref_new(int fd) { (void)fd; return NULL; }
void pp__file_ref_put(struct pp__file_ref *ref) { (void)ref; }
