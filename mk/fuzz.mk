# SPDX-License-Identifier: MIT
# mk/fuzz.mk - libFuzzer targets: `make fuzz` builds test/fuzz-*.c with
# clang (-fsanitize=fuzzer,address,undefined) into build-fuzz/ and runs each
# one for a bounded time on its corpus, test/fuzz-corpus/<target>/.
#
#   FUZZ_SECONDS  time per target (default 30); FUZZ_RUNS caps the inputs
#   FUZZ_TARGETS  which targets to run (default: all that can be built)
#   FUZZ_OUT      where new inputs and crash reproducers go (default
#                 build-fuzz/out/<target>/{new,artifacts}); never the repo
#   FUZZ_CC       the compiler (default clang; needs libclang-rt-14-dev)
#
# `make fuzz-merge` adds the new inputs of earlier runs that add coverage
# to the committed corpus (libFuzzer -merge=1), for a human to review.
# Reproduce a finding: build-fuzz/fuzz-<target> <reproducer file>.
#
# The library is compiled again here, with clang and coverage
# instrumentation (-fsanitize=fuzzer-no-link), so the fuzzer sees inside it.
# fuzz-cli also links the CLI's sources (tools/*.c, main renamed so that
# libFuzzer's main is the one that runs); it is built only when the CLI
# provides what it calls (FUZZ_CLI_HAVE below), so a CLI still being
# written never breaks `make fuzz`.

FZ            := build-fuzz
FUZZ_CC       ?= clang
FUZZ_CFLAGS   ?= -O1 -g
FUZZ_SECONDS  ?= 30
FUZZ_RUNS     ?= 5000000
FUZZ_OUT      ?= $(FZ)/out
FUZZ_FLAGS    ?= -timeout=20 -rss_limit_mb=3072 -max_len=4096 -print_final_stats=1
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		 -fno-omit-frame-pointer
FUZZ_ALL_CFLAGS = $(FUZZ_CFLAGS) -std=gnu11 -Wall -Wextra $(WERROR) -D_GNU_SOURCE \
		  -Iinclude -Isrc -pthread $(FUZZ_SAN)

FUZZ_LIB_OBJ  := $(LIB_SRC:src/%.c=$(FZ)/obj/%.o)
FUZZ_LIB      := $(FZ)/libpagepipe-fuzz.a

# fuzz-cli calls the CLI's parse_opts() (declared in tools/tool.h) and
# parse_size(); until both exist it is left out.
FUZZ_CLI_SRC  := $(sort $(wildcard tools/*.c))
FUZZ_CLI_HAVE := $(and $(shell grep -ls 'int parse_opts' tools/tool.h /dev/null),\
		       $(shell grep -ls '^int parse_size' $(FUZZ_CLI_SRC) /dev/null))

FUZZ_ALL      := $(sort $(patsubst test/fuzz-%.c,%,$(wildcard test/fuzz-*.c)))
FUZZ_BUILDABLE := $(filter-out $(if $(FUZZ_CLI_HAVE),,cli),$(FUZZ_ALL))
FUZZ_TARGETS  ?= $(FUZZ_BUILDABLE)
FUZZ_BINS     := $(FUZZ_TARGETS:%=$(FZ)/fuzz-%)

.PHONY: fuzz fuzz-build fuzz-merge

$(FZ)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_ALL_CFLAGS) -fsanitize=fuzzer-no-link -fvisibility=hidden -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(FZ)/fuzz-cli: test/fuzz-cli.c $(FUZZ_CLI_SRC) $(wildcard tools/*.h) $(FUZZ_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(FUZZ_ALL_CFLAGS) -Itools -fsanitize=fuzzer -o $@ \
		test/fuzz-cli.c $(FUZZ_CLI_SRC) -Dmain=pagepipe_tool_main $(FUZZ_LIB) -pthread

$(FZ)/fuzz-%: test/fuzz-%.c test/fuzz.h $(FUZZ_LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(FUZZ_ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) -pthread

fuzz-build: $(FUZZ_BINS)

# Each target runs even when an earlier one failed; the first directory
# libFuzzer is given receives new inputs, so the committed corpus is only read.
fuzz: fuzz-build
	@$(if $(filter cli,$(FUZZ_ALL)),$(if $(FUZZ_CLI_HAVE),,echo "fuzz-cli: not built: tools/ has no parse_opts() and parse_size() yet";))
	$(Q)fail=""; for t in $(FUZZ_TARGETS); do \
		out=$(FUZZ_OUT)/$$t; mkdir -p $$out/new $$out/artifacts; \
		corpus=test/fuzz-corpus/$$t; [ -d $$corpus ] || corpus=; \
		echo "  FUZZ    fuzz-$$t for $(FUZZ_SECONDS)s (log: $$out/log)"; \
		if $(FZ)/fuzz-$$t $(FUZZ_FLAGS) -max_total_time=$(FUZZ_SECONDS) -runs=$(FUZZ_RUNS) \
			-artifact_prefix=$$out/artifacts/ $$out/new $$corpus >$$out/log 2>&1; then \
			grep -E '^stat::(number_of_executed_units|new_units_added)|^Done|INITED' $$out/log | sed 's/^/          /'; \
		else \
			fail="$$fail $$t"; echo "fuzz-$$t: FAILED; its reproducer is in $$out/artifacts/:"; \
			ls $$out/artifacts/ | sed 's/^/          /'; \
			echo "  reproduce: FUZZ_TRACE=1 $(FZ)/fuzz-$$t $$out/artifacts/<file> (the input is in the log as Base64)"; \
			grep -v -E '^#[0-9]+' $$out/log | tail -n 60 | sed 's/^/    /'; \
		fi; \
	done; \
	if [ -n "$$fail" ]; then echo "fuzz: failed:$$fail"; exit 1; fi

fuzz-merge: fuzz-build
	$(Q)for t in $(FUZZ_TARGETS); do \
		[ -d $(FUZZ_OUT)/$$t/new ] || continue; mkdir -p test/fuzz-corpus/$$t; \
		$(FZ)/fuzz-$$t -merge=1 -max_len=4096 test/fuzz-corpus/$$t $(FUZZ_OUT)/$$t/new 2>&1 | tail -n 2; \
	done
