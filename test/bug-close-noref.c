// SPDX-License-Identifier: MIT
/*
 * Description: pp_close() of a read end while a pp_read that holds no
 * reference on it is copying.  Between CPUs, pp_read takes rd_mutex with
 * one CAS that marks it held without a file reference (wait.c: SIDE_NOREF)
 * instead of taking one; pp_close() must wait for such a read as it waits
 * for a fast section, or the last close frees the pipe under the copy.
 *
 * The read's destination is registered with userfaultfd, so the copy stops
 * at its first byte, inside the section, for as long as the test likes:
 * no timing.  The write end is closed first, so the read end's close is
 * the last and frees the pipe.  Checks: the close does not return while
 * the read is stopped; the read then returns every byte, in order, and
 * ASan sees no use after free.  Without the wait the close returns at once
 * (and the resumed copy runs in a freed pipe).
 */
#include "helpers.h"
#include "internal.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define LEN	(16 * 4096)

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY	1
#endif

struct job {
	struct pp_file *end;
	char *buf;
	ssize_t ret;
	int err;
	bool done;		/* atomic */
};

static void *reader(void *arg)
{
	struct job *j = arg;

	errno = 0;
	j->ret = pp_read(j->end, j->buf, LEN);
	j->err = errno;
	__atomic_store_n(&j->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void *closer(void *arg)
{
	struct job *j = arg;

	j->ret = pp_close(j->end);
	__atomic_store_n(&j->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static int uffd_open(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	struct uffdio_api api = { .api = UFFD_API };

	if (fd < 0)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api)) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(void)
{
	static char src[LEN];
	struct job rj = { 0 }, cj = { 0 };
	struct uffdio_register reg;
	struct uffdio_copy copy;
	struct uffd_msg msg;
	struct pp_file *e[2];
	struct pp_pipe *p;
	pthread_t rt, ct;
	struct pollfd pfd;
	char *buf;
	int uffd;

	if (t_under_valgrind())
		return t_skip("valgrind does not support userfaultfd");
	uffd = uffd_open();
	if (uffd < 0)
		return t_skip("userfaultfd(2): %s (vm.unprivileged_userfaultfd, or no kernel "
			      "support): the copy cannot be stopped inside the section",
			      strerror(errno));
	t_watchdog(60, "bug-close-noref");
	buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(buf != MAP_FAILED);
	reg = (struct uffdio_register){
		.range = { .start = (uintptr_t)buf, .len = LEN },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	if (ioctl(uffd, UFFDIO_REGISTER, &reg))
		return t_skip("UFFDIO_REGISTER: %s", strerror(errno));

	t_pipe2(e, 0);
	p = e[0]->pipe;
	t_fill(src, LEN, 0, 7);
	ASSERT_EQ(t_write_full(e[1], src, LEN), LEN);
	ASSERT_EQ(pp_close(e[1]), 0);

	rj = (struct job){ .end = e[0], .buf = buf };
	ASSERT_EQ(pthread_create(&rt, NULL, reader, &rj), 0);
	/* The copy's first store faults: the reader is inside, the lock held. */
	pfd = (struct pollfd){ .fd = uffd, .events = POLLIN };
	ASSERT_EQ(poll(&pfd, 1, 20000), 1);
	ASSERT_EQ(read(uffd, &msg, sizeof(msg)), (ssize_t)sizeof(msg));
	ASSERT_EQ(msg.event, UFFD_EVENT_PAGEFAULT);
	ASSERT_TRUE(__atomic_load_n(&p->rd_mutex.state, __ATOMIC_RELAXED) & SIDE_HELD);
	/* The way in this test means: no reference taken (one, the open one). */
	ASSERT_TRUE(__atomic_load_n(&p->rd_mutex.state, __ATOMIC_RELAXED) & SIDE_NOREF);
	ASSERT_EQ(atomic_load(&e[0]->refs), 1);

	cj = (struct job){ .end = e[0] };
	ASSERT_EQ(pthread_create(&ct, NULL, closer, &cj), 0);
	t_sleep_ms(100);
	/* The close waits for the read; the read is still stopped. */
	ASSERT_EQ(__atomic_load_n(&cj.done, __ATOMIC_ACQUIRE), false);
	ASSERT_EQ(__atomic_load_n(&rj.done, __ATOMIC_ACQUIRE), false);

	/* Let the copy go on: the whole range, with the bytes it had. */
	copy = (struct uffdio_copy){
		.dst = (uintptr_t)buf, .src = (uintptr_t)src, .len = LEN, .mode = 0,
	};
	memset(src, 0, LEN);
	ASSERT_EQ(ioctl(uffd, UFFDIO_COPY, &copy), 0);
	t_join(rt, NULL, 20);
	t_join(ct, NULL, 20);
	ASSERT_EQ(rj.ret, LEN);
	ASSERT_EQ(cj.ret, 0);
	ASSERT_EQ(t_check(buf, LEN, 0, 7), 0);
	close(uffd);
	munmap(buf, LEN);
	return T_EXIT_PASS;
}
