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
VALGRIND_FLAGS   ?= -q --error-exitcode=99 --leak-check=full \
		    --errors-for-leak-kinds=definite --show-leak-kinds=definite \
		    --track-origins=yes --num-callers=30
VALGRIND_SKIP    ?= stress-*
VALGRIND_TIMEOUT ?= 600

valgrind: $(TESTS)
ifneq ($(SAN),)
	$(error make valgrind needs the plain build; drop SAN=$(SAN))
endif
	@command -v $(firstword $(VALGRIND)) >/dev/null || { echo "valgrind not found (apt-get install valgrind)"; exit 1; }
	$(Q)B=$(B) TEST_TIMEOUT=$(VALGRIND_TIMEOUT) TEST_SKIP="$(VALGRIND_SKIP) $(TEST_SKIP)" \
		TEST_WRAP="$(VALGRIND) $(VALGRIND_FLAGS)" test/runtests.sh $(TESTS)
