# nvmefs - plain GNU make.  `make` builds build/nvmefsd, build/nvmefsctl and
# build/nvmefs-perf; `make check` runs every test; `make check SAN=1` builds
# into build-san/ with ASan+UBSan and runs the unit and integration tests there;
# `make check TSAN=1` does the same in build-tsan/ with ThreadSanitizer (clang).
# `make fuzz`, `make memcheck` and `make soak` are described at their rules.
#
# Each src/<module>/ is its own static archive (build/lib/libnvmefs_<module>.a),
# so a test links only the objects it uses.  New .c files are picked up
# without editing this file.

# One version for everything built here: the newest entry of debian/changelog
# (what the package is built as); `make VERSION=...` overrides it (not the
# environment).  It is
# compiled into one object, $(B)/obj/version.o, rewritten only when the
# version changes, so that building another version recompiles that file and
# relinks (src/common/version.h)
ifeq ($(filter command line,$(origin VERSION)),)
VERSION := $(shell head -n 1 debian/changelog | cut -d ' ' -f 2 | tr -d '()')
endif
ifeq ($(VERSION),)
$(error no version: debian/changelog's first line should read "nvmefs (VERSION) ...")
endif
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
BINDIR = $(PREFIX)/bin
SBINDIR = $(PREFIX)/sbin
MANDIR = $(PREFIX)/share/man
COMPLETIONDIR = $(PREFIX)/share/bash-completion/completions
# the Grafana dashboard and the Prometheus alert rules
DATADIR = $(PREFIX)/share/nvmefs
UNITDIR ?= /lib/systemd/system
# node_exporter's textfile collector directory (Debian's
# prometheus-node-exporter reads this one), for nvmefs-metrics.service
TEXTFILEDIR ?= /var/lib/prometheus/node-exporter
CONF ?= etc/nvmefs.conf

ifeq ($(SAN),1)
B ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT := -O1
else ifeq ($(TSAN),1)
# clang: gcc refuses atomic_thread_fence under -fsanitize=thread
B ?= build-tsan
CC := clang
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
OPT := -O1
else ifeq ($(FUZZ),1)
# libFuzzer needs clang; the module archives are instrumented for coverage
B ?= build-fuzz
CC := clang
SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT := -O1
else
B ?= build
SANFLAGS :=
OPT := -O2
endif

CC ?= gcc
PKGS := fuse3 inih json-c libsystemd mount liburing
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

CFLAGS ?= $(OPT) -g
CFLAGS += -std=gnu11 -Wall -Wextra -Werror -pthread $(SANFLAGS)
# version.h is included everywhere: NVMEFS_VERSION names the one object's
# string, so no other object changes with the version
CPPFLAGS += -D_GNU_SOURCE -include src/common/version.h -DNVMEFS_SYSCONFDIR='"$(SYSCONFDIR)"' \
	-Isrc -Isrc/common -Isrc/engine -Isrc/sim -Isrc/config -Isrc/fuse -Itests/support $(PKG_CFLAGS)
LDFLAGS += -pthread $(SANFLAGS)
LDLIBS += $(PKG_LIBS) -lev -lnuma -lm

MODULES := common config engine sim fuse
lib_srcs = $(wildcard src/$(1)/*.c)
lib_objs = $(patsubst src/%.c,$(B)/obj/%.o,$(call lib_srcs,$(1)))
LIBS := $(foreach m,$(MODULES),$(if $(call lib_srcs,$(m)),$(B)/lib/libnvmefs_$(m).a))
# link order: dependents first
LINK_LIBS := $(filter %fuse.a,$(LIBS)) $(filter %engine.a,$(LIBS)) $(filter %sim.a,$(LIBS)) \
	$(filter %engine.a,$(LIBS)) $(filter %config.a,$(LIBS)) $(filter %common.a,$(LIBS))

# the daemon's rooms (src/daemon/*.c but main.c: the admin server, the
# controller manager, the life cycle...), linked into nvmefsd with main.o
# and, as an archive, into the unit tests and fuzzers that drive them (a
# test pulls in only the objects it uses)
ADMIN_LIB := $(B)/lib/libnvmefs_daemon.a
ADMIN_OBJS := $(patsubst src/%.c,$(B)/obj/%.o,$(filter-out src/daemon/main.c,$(wildcard src/daemon/*.c)))

# what the tests share (tests/support: the engine rig), linked into the unit
# tests and the helpers
TESTSUP_OBJS := $(patsubst tests/support/%.c,$(B)/obj/testsupport/%.o,$(wildcard tests/support/*.c))
TESTSUP := $(B)/lib/libnvmefs_testsupport.a

PROGS := $(B)/nvmefsd $(B)/nvmefsd-audit $(B)/nvmefsctl $(B)/nvmefs-perf
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRCS))
HELPER_SRCS := $(wildcard tests/helpers/*.c) $(wildcard bench/*.c)
HELPER_BINS := $(addprefix $(B)/tools/,$(notdir $(basename $(HELPER_SRCS))))

# LD_PRELOAD objects the tests put under fio (tests/preload/*.c)
PRELOAD_SRCS := $(wildcard tests/preload/*.c)
PRELOAD_LIBS := $(patsubst tests/preload/%.c,$(B)/tools/%.so,$(PRELOAD_SRCS))

all: $(PROGS) $(UNIT_BINS) $(HELPER_BINS) $(PRELOAD_LIBS)
# the unit tests alone (the sanitizer trees of make check need no more)
unit-tests: $(UNIT_BINS)
# what make run, make install and the package need: the programs, no tests
programs: $(PROGS)

$(B)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

define lib_rule
$(B)/lib/libnvmefs_$(1).a: $(call lib_objs,$(1))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call lib_rule,$(m))))

# the version's object: its source is rewritten only when the version
# changes (cmp), so that an unchanged version rebuilds nothing
VERSION_OBJ := $(B)/obj/version.o
$(B)/gen/version.c: FORCE
	@mkdir -p $(dir $@)
	@printf '/* generated by the Makefile: the version (src/common/version.h) */\nconst char nvmefs_version[] = "%s";\n' \
		'$(VERSION)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
$(VERSION_OBJ): $(B)/gen/version.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(B)/lib/libnvmefs_common.a: $(VERSION_OBJ)

$(B)/nvmefsd: $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/daemon/*.c)) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LINK_LIBS) $(LDLIBS)
# nvmefsd-audit: the same daemon with the front end's audit compiled in
# (src/fuse/audit.h: NVMEFS_AUDIT), what the integration suites and `make
# soak` run; only src/fuse is compiled again for it.  Never installed.
AUDIT_FUSE := $(B)/lib/libnvmefs_fuse_audit.a
$(B)/obj-audit/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DNVMEFS_AUDIT $(CFLAGS) -MMD -MP -c -o $@ $<
$(AUDIT_FUSE): $(patsubst src/%.c,$(B)/obj-audit/%.o,$(call lib_srcs,fuse))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(B)/nvmefsd-audit: $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/daemon/*.c)) $(AUDIT_FUSE) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(AUDIT_FUSE) $(filter-out %fuse.a,$(LINK_LIBS)) $(LDLIBS)
$(B)/nvmefsctl: $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/cli/*.c)) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LINK_LIBS) $(LDLIBS) -lncursesw
$(B)/nvmefs-perf: $(patsubst src/%.c,$(B)/obj/%.o,$(wildcard src/perf/*.c)) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LINK_LIBS) $(LDLIBS)

$(B)/obj/testsupport/%.o: tests/support/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<
$(TESTSUP): $(TESTSUP_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(ADMIN_LIB): $(ADMIN_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/tests/%: tests/unit/%.c $(LIBS) $(TESTSUP) $(ADMIN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CHECK_CFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(ADMIN_LIB) $(TESTSUP) $(LINK_LIBS) $(LDLIBS) $(CHECK_LIBS)

# small programs the tests and benchmarks use (tests/helpers/*.c, bench/*.c)
$(B)/tools/%: tests/helpers/%.c $(LIBS) $(TESTSUP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(TESTSUP) $(LINK_LIBS) $(LDLIBS)
# (never with a sanitizer: they go into fio, which is not built with one)
$(B)/tools/%.so: tests/preload/%.c
	@mkdir -p $(dir $@)
	$(CC) -D_GNU_SOURCE -O2 -g -std=gnu11 -Wall -Wextra -Werror -fPIC -shared -MMD -MP -o $@ $< -ldl
$(B)/tools/%: bench/%.c $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(LINK_LIBS) $(LDLIBS)

# (not the package's build tree in $(B)/deb, nor directories such as sysusers.d)
-include $(shell find $(B) -path '$(B)/deb' -prune -o -name '*.d' -type f -print 2>/dev/null)

# ---- set-up, run, test ----
deps:
	@sh scripts/deps.sh all

# only what building and running need (no QEMU, clang, valgrind, fio)
run:
	@sh scripts/deps.sh run
	$(MAKE) programs
	$(B)/nvmefsd -f -c $(CONF)

# The whole suite: unit and integration tests (on both FUSE transports), the
# unit tests again under ASan+UBSan, ThreadSanitizer and valgrind, the
# fuzzers, and the VFIO tests in a QEMU guest.  tests/run.sh prints the
# summary and fails if anything failed.
ifeq ($(SAN),1)
check: deps
	$(MAKE) SAN=1 all
	BUILD=$(B) sh tests/run.sh unit integration
else ifeq ($(TSAN),1)
check: deps
	$(MAKE) TSAN=1 all
	BUILD=$(B) sh tests/run.sh unit integration
else
# tests/check.sh: the builds and suites in three lanes (its header says which)
check: deps
	FUZZ_SECONDS=$(CI_FUZZ_SECONDS) sh tests/check.sh
endif

# ---- fuzzing: tests/fuzz/fuzz_NAME.c, seeds in tests/fuzz/corpus/NAME/ ----
# `make fuzz` runs each target for FUZZ_SECONDS (60) on a scratch copy of its
# corpus; `make check` runs each for CI_FUZZ_SECONDS (15) as a smoke test.
FUZZ_SECONDS ?= 60
CI_FUZZ_SECONDS ?= 15
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRCS))
fuzzers: $(FUZZ_BINS)
$(B)/fuzz/%: tests/fuzz/%.c $(LIBS) $(ADMIN_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(ADMIN_LIB) $(LINK_LIBS) $(LDLIBS)
# ---- soak (not in CI): 10 minutes of fio verify under injected faults,
# 20 kill -9 cycles, 20 kill -9 of a daemon whose mount fio keeps using
# (t-crash-adopt: adopted each time), 10 of one under ext4 in a minute of
# file system churn (t-crash-adopt-fs), 10 nvmefsctl restart of a replaced
# binary under fio (t-upgrade) and 50 power cuts while writers use every durability
# mode, and SOAK_FAULTSEQ (300) random fault sequences per case of
# test_faultseq (1800 in all); bench/soak/ gets the verdict and the plot ----
SOAK_FAULTSEQ ?= 300
soak: deps
	$(MAKE) all
	sh bench/soak.sh
	CRASH_CYCLES=20 BUILD=$(CURDIR)/build sh tests/integration/t-crash-cycles.sh
	SOAK=1 FUSE_TRANSPORT=classic BUILD=$(CURDIR)/build sh tests/integration/t-crash-adopt.sh
	SOAK=1 FUSE_TRANSPORT=classic BUILD=$(CURDIR)/build sh tests/integration/t-crash-adopt-fs.sh
	SOAK=1 FUSE_TRANSPORT=classic BUILD=$(CURDIR)/build sh tests/integration/t-upgrade.sh
	POWERFAIL_CYCLES=50 BUILD=$(CURDIR)/build sh tests/integration/t-powerfail-cycles.sh
	NVMEFS_FAULTSEQ_N=$(SOAK_FAULTSEQ) CK_DEFAULT_TIMEOUT=36000 build/tests/test_faultseq

fuzz: deps
	$(MAKE) FUZZ=1 fuzzers
	BUILD_FUZZ=build-fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/run.sh fuzz

check-unit: all
	BUILD=$(B) sh tests/run.sh unit
check-integration: all
	BUILD=$(B) sh tests/run.sh integration
check-vm: all
	BUILD=$(B) sh tests/run.sh vm
memcheck: all
	BUILD=$(B) sh tests/run.sh unit-valgrind

install: programs
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(SYSCONFDIR)/nvmefs
	install -m 755 $(B)/nvmefsd $(DESTDIR)$(SBINDIR)/nvmefsd
	install -m 755 $(B)/nvmefsctl $(DESTDIR)$(BINDIR)/nvmefsctl
	install -m 755 $(B)/nvmefs-perf $(DESTDIR)$(BINDIR)/nvmefs-perf
	install -m 755 scripts/vfio-bind $(DESTDIR)$(SBINDIR)/vfio-bind
	install -m 755 scripts/nvmefs-export $(DESTDIR)$(SBINDIR)/nvmefs-export
	install -d -m 755 $(DESTDIR)$(SYSCONFDIR)/nvmefs/export
	install -d $(DESTDIR)$(COMPLETIONDIR)
	install -m 644 contrib/bash-completion/nvmefsctl $(DESTDIR)$(COMPLETIONDIR)/nvmefsctl
	[ -e $(DESTDIR)$(SYSCONFDIR)/nvmefs/nvmefs.conf ] || \
		install -m 644 etc/nvmefs.conf $(DESTDIR)$(SYSCONFDIR)/nvmefs/nvmefs.conf
	if [ -d systemd ] && ls systemd/*.service >/dev/null 2>&1; then \
		install -d $(DESTDIR)$(UNITDIR) && \
		for u in systemd/*.service systemd/*.timer; do \
			sed 's|@SBINDIR@|$(SBINDIR)|g; s|@BINDIR@|$(BINDIR)|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g; s|@TEXTFILEDIR@|$(TEXTFILEDIR)|g' $$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u); \
		done; fi
	install -d $(DESTDIR)$(DATADIR)/grafana $(DESTDIR)$(DATADIR)/prometheus
	install -m 644 contrib/grafana/nvmefs.json $(DESTDIR)$(DATADIR)/grafana/nvmefs.json
	install -m 644 contrib/prometheus/nvmefs-alerts.yml $(DESTDIR)$(DATADIR)/prometheus/nvmefs-alerts.yml
	# the man pages' headers name the version being installed
	for s in 1 5 8; do for m in docs/man/*.$$s; do [ -e "$$m" ] || continue; \
		install -d $(DESTDIR)$(MANDIR)/man$$s; \
		sed '1s/"nvmefs [^"]*"/"nvmefs $(VERSION)"/' $$m > $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); \
		chmod 644 $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); done; done

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/nvmefsd $(DESTDIR)$(BINDIR)/nvmefsctl $(DESTDIR)$(BINDIR)/nvmefs-perf
	rm -f $(DESTDIR)$(SBINDIR)/vfio-bind $(DESTDIR)$(SBINDIR)/nvmefs-export $(DESTDIR)$(COMPLETIONDIR)/nvmefsctl
	for u in systemd/*.service systemd/*.timer; do rm -f $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	for s in 1 5 8; do for m in docs/man/*.$$s; do rm -f $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); done; done
	rm -f $(DESTDIR)$(DATADIR)/grafana/nvmefs.json $(DESTDIR)$(DATADIR)/prometheus/nvmefs-alerts.yml
	-rmdir $(DESTDIR)$(DATADIR)/grafana $(DESTDIR)$(DATADIR)/prometheus $(DESTDIR)$(DATADIR) 2>/dev/null
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/nvmefs/nvmefs.conf"

# ---- the Debian package: $(B)/deb/nvmefs_VERSION_amd64.deb, built by
# dpkg-buildpackage in a copy of this tree ($(B)/deb/src: dpkg-buildpackage
# writes beside the tree it builds, and its clean must not touch this one's
# build directories), then checked by lintian when it is installed ----
deb:
	@sh scripts/deps.sh deb
	sh scripts/mkdeb $(B)/deb

format:
	clang-format -i $$(find src tests bench -name '*.[ch]')

tidy:
	clang-tidy $$(find src -name '*.c') -- $(CPPFLAGS) -std=gnu11

clean:
	rm -rf build build-san build-tsan build-fuzz

.PHONY: FORCE
FORCE:
.PHONY: all programs unit-tests deb deps run check fuzz fuzzers soak memcheck check-unit check-integration check-vm install uninstall format tidy clean
.SECONDARY:
