# SPDX-License-Identifier: MIT
# mk/valgrind.mk - `make valgrind`: every compiled test under valgrind
# memcheck, failing on any memory error and on definite leaks.
#
# It uses the plain build ($(B), normally build/): valgrind cannot run
# sanitizer builds.  Shell tests are not run here (test/runtests.sh never
# wraps them, and they would only repeat `make check`).  VALGRIND_SKIP names
# tests to leave out: by default the stress tests, whose threads valgrind
# runs one at a time so that they take many times their normal length; TSan
# covers them in CI.  VALGRIND_TIMEOUT is the per-test limit in seconds.

VALGRIND         ?= valgrind
VALGRIND_SUPP    := $(B)/valgrind.supp
VALGRIND_FLAGS   ?= -q --error-exitcode=99 --leak-check=full \
		    --errors-for-leak-kinds=definite --show-leak-kinds=definite \
		    --track-origins=yes --num-callers=30 --suppressions=$(VALGRIND_SUPP)
# The argument-order differential tests are left out too: valgrind's own
# system-call wrappers answer a bad descriptor with EBADF before the kernel
# sees the call, so the kernel side no longer gives the kernel's answer
# (splice(-1, ..., 0, 0) is 0 in Linux, EBADF under valgrind), and their
# deadlock watchdogs and time-bounded thread runs (splice-pipe's two
# directions must each move within 2 s) fail when valgrind runs the
# threads one at a time.
# ASan and LSan run them in CI instead.  fidelity-kernel is left out for
# the same reason: it hands the kernel memory that is unmapped, PROT_NONE or
# past a file's end on purpose, which valgrind reports and, for vmsplice,
# answers differently from the kernel (its wrapper checks the whole iovec).
# kres-partial and kres-bugs tell a call that waits from one that returns
# by its thread sleeping in the kernel, which a thread waiting for
# valgrind's turn also does.
VALGRIND_SKIP    ?= stress-* pipe-badargs pipe-fdopen splice-args tee-basic vmsplice-basic splice-pipe \
		    fidelity-kernel kres-partial kres-bugs
VALGRIND_TIMEOUT ?= 600

# The differential tests hand the kernel bad pointers on purpose (poll(NULL,
# 1) must fail with EFAULT on both sides), and memcheck reports each such
# system call parameter.  Suppressed only where a test function makes the
# call itself (the caller of its libc wrapper is test_*): a bad pointer the
# library passes on has library frames in between and is still reported.
# Memcheck matches parameter names exactly, hence the list; it is kept to
# the calls the tests make with NULL on purpose, since the same suppression
# would also hide a test that reads past its own buffer (read(buf)).  Add
# a name here when a new test needs it.
VALGRIND_BADPTR_PARAMS := poll(ufds) poll(ufds.fd) poll(ufds.events) poll(ufds.revents) \
	ppoll(ufds) ppoll(ufds.fd) ppoll(ufds.events) ppoll(ufds.revents) \
	vmsplice(iov[...]) ioctl(FIONREAD) ioctl(TIOCLINUX) write(buf) read(buf) \
	readv(vector[...]) writev(vector[...]) readv(vector) writev(vector)

$(VALGRIND_SUPP): mk/valgrind.mk
	@mkdir -p $(@D)
	$(Q)for p in $(foreach p,$(VALGRIND_BADPTR_PARAMS),'$(p)'); do \
		printf '{\n   test-bad-pointer-%s\n   Memcheck:Param\n   %s\n   obj:*/libc.so*\n   fun:test_*\n}\n' "$$p" "$$p"; \
		printf '{\n   test-bad-pointer-%s-2\n   Memcheck:Param\n   %s\n   obj:*/libc.so*\n   obj:*/libc.so*\n   fun:test_*\n}\n' "$$p" "$$p"; \
		printf '{\n   test-bad-pointer-%s-3\n   Memcheck:Param\n   %s\n   obj:*/libc.so*\n   fun:k*\n   fun:test_*\n}\n' "$$p" "$$p"; \
	done > $@

valgrind: $(TESTS) $(VALGRIND_SUPP)
ifneq ($(SAN),)
	$(error make valgrind needs the plain build; drop SAN=$(SAN))
endif
	@command -v $(firstword $(VALGRIND)) >/dev/null || { echo "valgrind not found (apt-get install valgrind)"; exit 1; }
	$(Q)B=$(B) TEST_TIMEOUT=$(VALGRIND_TIMEOUT) TEST_SKIP="$(VALGRIND_SKIP) $(TEST_SKIP)" \
		TEST_WRAP="$(VALGRIND) $(VALGRIND_FLAGS)" test/runtests.sh $(TESTS)
