# libFuzzer targets for the parsers of untrusted input in the C core (included by the Makefile).
#
#   make fuzz-build    install clang if missing (Debian, as root), build every target into build/fuzz/
#   make fuzz          run each target for FUZZ_SECONDS (default 300); fails if any finds a crash
#                      (make -j2 fuzz: two at a time)
#   make fuzz-ci       the same, 20 s each, two at a time when there are CPUs for it (CI)
#   make fuzz-known    replay fuzz/crashes/*/*: which reported bugs still reproduce
#
# Targets (fuzz/fuzz_TARGET.c; each says what it checks):
#   seccomp   lb_filter_build from fuzzed policies, verdicts checked in a BPF interpreter
#   lua_core  core.open / session:run / copy tables through a real LuaJIT state, fake backend
#   paths     jail_relative, entry_suffix, lb_open_beneath, lb_mkdirs_beneath on a scratch tree
#   tar       receive_tree: fuzzed tar streams unpacked beneath a scratch tree
#   resolve   the PATH search for argv[0]
#   report    lb_read_report: child error records over a pipe
#   http      llmbox serve's request parser (lua_httpparse.c over http-parser), fed in pieces
#   cell      lb_cell_parse: an interactive program's answers to its cells
#   layer     lb_layer_apply: image layers (untrusted tars) onto a root being built, whiteouts and all
#   job       lb_helper_job_decode: llmbox-run's reader of the jobs it is handed, round trips checked
#
# paths, tar and layer create files for real under FUZZ_TMP (default build/fuzz-tmp; a tmpfs such as
# FUZZ_TMP=/dev/shm/llmbox-fuzz makes them about 5 times faster).
# Seeds are fuzz/corpus/TARGET/ (committed, small); the working corpus grows in build/fuzz/corpus/
# and crashes land in build/fuzz/crashes/TARGET/. Bugs already reported are kept as reproducers in
# fuzz/crashes/TARGET/ (all fixed; `make fuzz-known` replays them). FUZZ_SKIP_KNOWN=1 (the harnesses leave those
# inputs out, fuzz/ubsan.supp silences the reported undefined behaviour) so that CI looks for new
# ones while a bug is open; the default, 0, runs everything.

FUZZ_CC         ?= clang
FUZZ_SECONDS    ?= 300
FUZZ_SKIP_KNOWN ?= 0
FUZZ_TMP        ?= $(CURDIR)/build/fuzz-tmp
FUZZ_JOBS       ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 1 ] && echo 2 || echo 1)
FUZZ_TARGETS    := seccomp lua_core paths tar resolve report http cell layer job
DEPS_FUZZ       := clang libclang-rt-14-dev llvm-14

FUZZ_DIR  := build/fuzz
FUZZ_SAN  := -g -O1 -fno-omit-frame-pointer
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

# The runtime is compiled again with clang and coverage; a harness that #includes a runtime file
# (to reach its static functions) does not link that file's object.
FUZZ_RUNTIME := $(filter-out runtime/lua_core.c runtime/lua_util.c runtime/lua_httpparse.c backends/native.c backends/wrapped.c,$(CORE_SRC))
fuzz_includes_seccomp := runtime/seccomp.c runtime/filter.c
fuzz_includes_paths   := runtime/transfer.c
fuzz_includes_tar     := runtime/transfer.c
fuzz_includes_resolve := runtime/chain_child.c
fuzz_includes_job     := runtime/chain_wire.c
fuzz_extra_lua_core   := runtime/lua_core.c runtime/lua_util.c runtime/lua_httpparse.c
fuzz_libs_lua_core     = $(LUA_LIBS)
fuzz_extra_http       := runtime/lua_httpparse.c
fuzz_libs_http         = $(LUA_LIBS)
# the harnesses build their own archives with libarchive linked in (the code under test loads it
# itself, runtime/lazy.c; fuzz_tar includes transfer.c, so most of its calls go through that table)
fuzz_libs_tar          = $(shell $(PKG_CONFIG) --libs libarchive 2>/dev/null)
fuzz_libs_layer        = $(shell $(PKG_CONFIG) --libs libarchive 2>/dev/null)
fuzz_flags_report     := -max_len=8192
fuzz_flags_cell       := -max_len=4096
fuzz_objs = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,\
	$(filter-out $(fuzz_includes_$(1)),$(FUZZ_RUNTIME)) $(fuzz_extra_$(1)))

FUZZ_ENV = LB_FUZZ_TMP=$(FUZZ_TMP) LB_FUZZ_SKIP_KNOWN=$(FUZZ_SKIP_KNOWN) \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1$(if $(filter 1,$(FUZZ_SKIP_KNOWN)),:suppressions=$(CURDIR)/fuzz/ubsan.supp)

.PHONY: fuzz-deps fuzz-build fuzz-bins fuzz fuzz-ci fuzz-run fuzz-tmp fuzz-known \
	$(FUZZ_TARGETS:%=fuzz-run-%)

fuzz-deps:
	@./.ci/deps.sh $(DEPS_BUILD) $(DEPS_FUZZ)

# A sub-make, so that pkg-config is asked after the packages are there.
fuzz-build: fuzz-deps
	@$(MAKE) --no-print-directory fuzz-bins

fuzz-bins: $(FUZZ_BINS)
	@:

$(FUZZ_DIR)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer-no-link,address,undefined $(WARN) $(DEP_CFLAGS) -c -o $@ $<

define FUZZ_TARGET_RULE
$(FUZZ_DIR)/fuzz_$(1): fuzz/fuzz_$(1).c fuzz/harness.h fuzz/input.h fuzz/scratch.c $(HEADERS) $(fuzz_includes_$(1)) $(call fuzz_objs,$(1))
	@mkdir -p $$(dir $$@)
	$$(FUZZ_CC) $$(FUZZ_SAN) -fsanitize=fuzzer,address,undefined $$(WARN) $$(DEP_CFLAGS) -o $$@ $$< \
		$(call fuzz_objs,$(1)) $$(DEP_LIBS) $$(fuzz_libs_$(1))
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call FUZZ_TARGET_RULE,$(t))))

fuzz: fuzz-build
	@$(MAKE) --no-print-directory fuzz-run

# Two targets at a time where there are CPUs for it.
fuzz-ci:
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) fuzz FUZZ_SECONDS=20

# Runs every target (in parallel with -j) even when one fails, then prints one line per target and
# fails if any found something.
fuzz-run: $(FUZZ_TARGETS:%=fuzz-run-%)
	@failed=""; for t in $(FUZZ_TARGETS); do \
		cat $(FUZZ_DIR)/$$t.result; \
		grep -q ': ok' $(FUZZ_DIR)/$$t.result || failed="$$failed $$t"; \
	done; \
	rm -rf $(FUZZ_TMP); \
	if [ -n "$$failed" ]; then echo "fuzz: crashes in:$$failed"; exit 1; fi

$(FUZZ_TARGETS:%=fuzz-run-%): fuzz-run-%: fuzz-tmp
	@mkdir -p $(FUZZ_DIR)/corpus/$* $(FUZZ_DIR)/crashes/$* fuzz/corpus/$*; \
	log=$(FUZZ_DIR)/$*.log; \
	if $(FUZZ_ENV) $(FUZZ_DIR)/fuzz_$* -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
		-print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/crashes/$*/ $(fuzz_flags_$*) \
		$(FUZZ_DIR)/corpus/$* fuzz/corpus/$* >$$log 2>&1; then \
		echo "fuzz $*: ok, $$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\).*/\1 runs in \2 s/p' $$log)"; \
	else \
		echo "fuzz $*: FAILED, see $$log and $(FUZZ_DIR)/crashes/$*/"; \
		grep -a -m3 -E '^SUMMARY|^==[0-9]+==ERROR|^fuzz_|^scratch:' $$log | sed 's/^/    /'; \
	fi >$(FUZZ_DIR)/$*.result

fuzz-tmp:
	@rm -rf $(FUZZ_TMP); mkdir -p $(FUZZ_TMP)

# Each reproducer of a reported bug, run with nothing skipped: "still there" until it is fixed,
# then delete the file and the bug's skip in the harness (or its line in fuzz/ubsan.supp).
fuzz-known: fuzz-build
	@rm -rf $(FUZZ_TMP); mkdir -p $(FUZZ_TMP); \
	for f in fuzz/crashes/*/*; do \
		[ -f "$$f" ] || continue; t=$$(basename $$(dirname $$f)); \
		if LB_FUZZ_TMP=$(FUZZ_TMP) $(FUZZ_DIR)/fuzz_$$t $$f >$(FUZZ_DIR)/known.log 2>&1; \
		then echo "fixed:       $$f"; \
		else echo "still there: $$f"; fi; \
	done; rm -rf $(FUZZ_TMP)
