# SPDX-License-Identifier: MIT
# pagepipe: GNU make.  `make`, `make check`, `make bench`, `make demo`,
# `make install` (PREFIX, LIBDIR, INCDIR, DESTDIR).  SAN=asan or SAN=tsan
# builds into build-asan/ or build-tsan/.  V=1 shows the commands.

NAME      := pagepipe
VERSION   := 0.1.0
SOVERSION := 0

PREFIX    ?= /usr/local
LIBDIR    ?= $(PREFIX)/lib
INCDIR    ?= $(PREFIX)/include
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

CC        ?= cc
CFLAGS    ?= -O2 -g
WERROR    ?= -Werror
override CFLAGS += -std=gnu11 -Wall -Wextra $(WERROR) -D_GNU_SOURCE -Iinclude -pthread
override LDFLAGS += -pthread

SAN ?=
ifeq ($(SAN),asan)
override CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
override LDFLAGS += -fsanitize=address,undefined
B ?= build-asan
else ifeq ($(SAN),tsan)
override CFLAGS += -fsanitize=thread -fno-omit-frame-pointer
override LDFLAGS += -fsanitize=thread
B ?= build-tsan
else
B ?= build
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

LIB_SRC   := $(sort $(wildcard src/*.c))
LIB_OBJ   := $(LIB_SRC:src/%.c=$(B)/obj/%.o)
LIB_PIC   := $(LIB_SRC:src/%.c=$(B)/pic/%.o)
TEST_SRC  := $(sort $(filter-out test/helpers.c test/fuzz-%.c,$(wildcard test/*.c)))
TESTS     := $(TEST_SRC:test/%.c=$(B)/test/%)
# Shell tests drive the CLI with real programs; they find binaries through $B.
# test/*-lib.sh are sourced by them (relay-lib.sh), not run.
TEST_SH   := $(sort $(filter-out test/runtests.sh test/%-lib.sh,$(wildcard test/*.sh)))
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCHES   := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
# Examples named after an event-loop library (libuv-*.c, libevent-*.c) are
# built only when pkg-config finds that library (Debian: libuv1-dev,
# libevent-dev); their tests skip, saying so, when it does not.
PKG_CONFIG ?= pkg-config
EX_LOOPS  := $(foreach l,libuv libevent,$(if $(shell $(PKG_CONFIG) --exists $(l) 2>/dev/null && echo y),$(l)))
EX_SRC    := $(sort $(filter-out $(foreach l,libuv libevent,examples/$(l)-%.c),$(wildcard examples/*.c)) \
		    $(foreach l,$(EX_LOOPS),$(wildcard examples/$(l)-*.c)))
EXAMPLES  := $(EX_SRC:examples/%.c=$(B)/examples/%)
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TOOL      := $(if $(TOOL_SRC),$(B)/pagepipe)
HDRS      := include/pagepipe.h $(wildcard src/*.h)

STATIC    := $(B)/lib$(NAME).a
SHARED    := $(B)/lib$(NAME).so.$(VERSION)

.PHONY: all lib tests benches examples tools check bench demo install uninstall clean stress fuzz valgrind FORCE
all: lib tools examples tests benches

lib: $(STATIC) $(SHARED)

$(B)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -fvisibility=hidden -c -o $@ $<

$(B)/pic/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(STATIC): $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_PIC) src/pagepipe.map
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,lib$(NAME).so.$(SOVERSION) -Wl,--version-script=src/pagepipe.map \
		-Wl,-z,defs $(LDFLAGS) -o $@ $(LIB_PIC)
	$(Q)ln -sf lib$(NAME).so.$(VERSION) $(B)/lib$(NAME).so.$(SOVERSION)
	$(Q)ln -sf lib$(NAME).so.$(SOVERSION) $(B)/lib$(NAME).so

$(B)/test/helpers.o: test/helpers.c test/helpers.h $(HDRS)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -Isrc -c -o $@ $<

# Tests link the static library so that they can reach the pp__ test hooks.
$(B)/test/%: test/%.c $(B)/test/helpers.o $(STATIC) $(wildcard test/*.h) $(HDRS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) -Isrc -o $@ $< $(B)/test/helpers.o $(STATIC) $(LDFLAGS)

# Benches see only the public API (no -Isrc), so they build against any core.
$(B)/bench/%: bench/%.c $(STATIC) $(wildcard bench/*.h)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(STATIC) $(LDFLAGS)

$(B)/examples/%: examples/%.c $(STATIC)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(STATIC) $(LDFLAGS)

$(B)/examples/libuv-%: examples/libuv-%.c $(STATIC)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $$($(PKG_CONFIG) --cflags libuv) -o $@ $< $(STATIC) \
		$$($(PKG_CONFIG) --libs libuv) $(LDFLAGS)

$(B)/examples/libevent-%: examples/libevent-%.c $(STATIC)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $$($(PKG_CONFIG) --cflags libevent) -o $@ $< $(STATIC) \
		$$($(PKG_CONFIG) --libs libevent) $(LDFLAGS)

$(B)/pagepipe: $(TOOL_SRC) $(STATIC) $(wildcard tools/*.h)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TOOL    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(TOOL_SRC) $(STATIC) $(LDFLAGS)

tests: $(TESTS)
benches: $(BENCHES)
examples: $(EXAMPLES)
tools: $(TOOL)

# The test command the README names.
check: all
	$(Q)B=$(B) test/runtests.sh $(TESTS) $(TEST_SH)

bench: $(BENCHES) $(TOOL)
	$(Q)B=$(B) bench/run.sh

demo: $(TOOL) $(EXAMPLES)
	$(Q)B=$(B) tools/demo.sh

stress: $(B)/test/stress-threads
	$(Q)PP_STRESS_SECONDS=$${PP_STRESS_SECONDS:-60} $(B)/test/stress-threads

# The .pc file records PREFIX, LIBDIR and INCDIR, which a file's date cannot
# tell apart: it depends on a file holding their values, rewritten only when
# they change, so an install with other values never ships an old one.
PC_VARS := $(PREFIX)|$(LIBDIR)|$(INCDIR)|$(VERSION)
$(B)/pc-vars: FORCE
	@mkdir -p $(@D)
	$(Q)printf '%s\n' '$(PC_VARS)' | cmp -s - $@ || printf '%s\n' '$(PC_VARS)' > $@

$(B)/lib$(NAME).pc: lib$(NAME).pc.in $(B)/pc-vars
	@mkdir -p $(@D)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
		-e 's|@VERSION@|$(VERSION)|' $< > $@

install: lib $(TOOL) $(B)/lib$(NAME).pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3
	install -m 644 include/pagepipe.h $(DESTDIR)$(INCDIR)/pagepipe.h
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf lib$(NAME).so.$(VERSION) $(DESTDIR)$(LIBDIR)/lib$(NAME).so.$(SOVERSION)
	ln -sf lib$(NAME).so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/lib$(NAME).so
	install -m 644 $(B)/lib$(NAME).pc $(DESTDIR)$(PKGCONFIGDIR)/
	install -m 755 $(TOOL) $(DESTDIR)$(BINDIR)/pagepipe
	for m in man/*.1; do [ -f "$$m" ] && install -m 644 $$m $(DESTDIR)$(MANDIR)/man1/ || true; done
	for m in man/*.3; do [ -f "$$m" ] && install -m 644 $$m $(DESTDIR)$(MANDIR)/man3/ || true; done
	sh man/aliases.sh $(DESTDIR)$(MANDIR)/man3 man/*.3

uninstall:
	rm -f $(DESTDIR)$(INCDIR)/pagepipe.h $(DESTDIR)$(LIBDIR)/lib$(NAME).* \
		$(DESTDIR)$(PKGCONFIGDIR)/lib$(NAME).pc $(DESTDIR)$(BINDIR)/pagepipe \
		$(DESTDIR)$(MANDIR)/man1/pagepipe.1
	for m in man/*.3; do rm -f $(DESTDIR)$(MANDIR)/man3/$$(basename $$m); done
	for n in $$(sh man/aliases.sh -l . man/*.3); do rm -f $(DESTDIR)$(MANDIR)/man3/$$n.3; done

clean:
	rm -rf build build-asan build-tsan build-fuzz

FORCE:

# Extra targets (fuzzing, valgrind...) live in mk/, one file per concern.
-include $(sort $(wildcard mk/*.mk))
