# llmbox — build, test, install.
#
#   make demo      install what is missing (Debian, as root), build, run Python in the native sandbox
#   make test      install what is missing, build, run every spec; ends with "N passed, N failed"
#   make test-fresh  the README's commands in a fresh Debian 12 root (root only; what CI runs)
#   make           build build/bin/llmbox and build/lib/llmbox/core.so
#   make install   PREFIX=/usr/local DESTDIR=  (binary, C module, Lua tree, policies)
#   make lint      clang-format check + warnings-as-errors build

PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
LUADIR  ?= $(PREFIX)/share/lua/5.1
LIBDIR  ?= $(PREFIX)/lib/lua/5.1
DATADIR ?= $(PREFIX)/share/llmbox

PKG_CONFIG ?= pkg-config
PKGS    := luajit libseccomp libarchive libcurl openssl
CC      ?= cc
CFLAGS  ?= -O2 -g
HARDEN  := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIC
# Only what runtime/llmbox.h marks LB_EXPORT leaves core.so (spec/04-install/symbols_spec.lua).
VISIBILITY := -fvisibility=hidden
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wformat=2
DEP_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
# libarchive (copies, images) and libcrypto (core.sha256: what a kept container's settings are
# recorded as) are loaded when first needed (runtime/lazy.c): not linked, as every process would
# load them (~2.5 ms with libxml2 and ICU). http-parser (llmbox serve's requests) ships no
# pkg-config file.
DEP_LIBS   = $(shell $(PKG_CONFIG) --libs libseccomp 2>/dev/null) -lhttp_parser
# OpenSSL (libcurl's TLS here): http.c ends an exec's stdin on a TLS stream with close_notify
CURL_LIBS  = $(shell $(PKG_CONFIG) --libs libcurl openssl 2>/dev/null)
WS_LIBS    = $(shell $(PKG_CONFIG) --libs libwebsockets 2>/dev/null)
LUA_LIBS   = $(shell $(PKG_CONFIG) --libs luajit 2>/dev/null)
ALL_CFLAGS = $(WARN) $(HARDEN) $(VISIBILITY) $(CFLAGS) $(DEP_CFLAGS)
ALL_LDFLAGS = -Wl,-z,relro,-z,now $(LDFLAGS)

CORE_SRC := runtime/util.c runtime/fds.c runtime/caps.c runtime/seccomp.c runtime/filter.c runtime/jail.c \
            runtime/limits.c runtime/cgroup.c runtime/chain.c runtime/chain_child.c runtime/chain_wire.c runtime/spawn.c runtime/supervise.c runtime/verdict.c runtime/cell.c \
            runtime/transfer.c runtime/layer.c runtime/lazy.c runtime/probe.c runtime/egress.c runtime/lua_core.c runtime/lua_util.c runtime/lua_httpparse.c \
            backends/native.c backends/wrapped.c
# llmbox.http_core: the engine drivers' HTTP client, a module of its own (libcurl takes ~14 ms to
# load: `llmbox run` and llmbox.core never pay it).
HTTP_SRC := runtime/http.c runtime/lua_http.c runtime/lua_util.c runtime/util.c
# llmbox.ws_core: the Kubernetes backend's websocket client (libwebsockets), apart for the same reason.
WS_SRC := runtime/ws.c runtime/lua_ws.c runtime/lua_util.c runtime/util.c
CORE_OBJ := $(CORE_SRC:%.c=build/obj/%.o)
HTTP_OBJ := $(HTTP_SRC:%.c=build/obj/%.o)
WS_OBJ   := $(WS_SRC:%.c=build/obj/%.o)
HEADERS  := runtime/llmbox.h runtime/internal.h runtime/run.h runtime/supervision.h runtime/lazy.h backends/backend.h

BIN    := build/bin/llmbox
MODULE := build/lib/llmbox/core.so
HTTP_MODULE := build/lib/llmbox/http_core.so
WS_MODULE := build/lib/llmbox/ws_core.so
# The docker/podman backends' helper inside each container: static, it runs in any image. It and
# jail-ready are built like llmbox-run (below): with musl where musl-gcc is.
HELPER := build/lib/llmbox/container-exec
# The program bwrap and nsjail start in the jails they built (backends/jail_ready.c): static, as any root
# filesystem may be the jail's.
READY := build/lib/llmbox/jail-ready
# Every native jail's setup child and every run's first child (runtime/run_helper.c), exec'd by the
# caller: static, so it starts without the dynamic loader, and built against musl where Debian's
# musl-tools is installed (DEPS_BUILD has it): glibc's start-up asks the CPU about its caches with
# ~90 cpuid instructions, each a VM exit on a virtual machine (~0.3 ms of every run and every jail
# measured here); musl's asks nothing. It links no library but libc (seccomp.c, which needs
# libseccomp, stays out: filter.c loads the compiled program). Without musl-gcc, glibc's static
# libc does the same job. The linker takes from the archive only what the helper uses.
RUN_HELPER := build/lib/llmbox/llmbox-run
MUSL_CC := $(shell command -v musl-gcc 2>/dev/null)
ifneq ($(MUSL_CC),)
HELPER_CC := $(MUSL_CC)
HELPER_OBJDIR := build/obj-musl
# musl's include path has no kernel headers: Debian's (linux-libc-dev), by symlink
MUSL_INC := build/musl-include
STATIC_CFLAGS = $(WARN) -fstack-protector-strong $(CFLAGS) -isystem $(MUSL_INC)
HELPER_CFLAGS = $(STATIC_CFLAGS)
else
HELPER_CC := $(CC)
HELPER_OBJDIR := build/obj
MUSL_INC :=
STATIC_CFLAGS = $(WARN) -D_FORTIFY_SOURCE=2 -fstack-protector-strong $(CFLAGS)
HELPER_CFLAGS = $(ALL_CFLAGS)
endif
RUN_HELPER_LIB := $(HELPER_OBJDIR)/librun.a
RUN_HELPER_OBJ := $(addprefix $(HELPER_OBJDIR)/runtime/,util.o fds.o caps.o filter.o jail.o limits.o cgroup.o chain.o chain_child.o chain_wire.o)
# The kubernetes backend's syscall filter loader (backends/pod_filter.c): no libc, a few KB, as it
# travels in each pod's environment.
POD_FILTER := build/lib/llmbox/pod-filter

# Debian packages: what building needs, and what the specs need on top.
DEPS_BUILD := gcc libc6-dev musl-tools make pkg-config luajit2 libluajit2-5.1-dev libseccomp-dev libarchive-dev libcurl4-openssl-dev libssl-dev libwebsockets-dev libhttp-parser-dev libnftables-dev lua-cjson lua-luv python3
# Toolchains the language recipes drive (the specs run each one for real). Defined before
# DEPS_TEST: a `:=` assignment expands what it names at once.
DEPS_LANGS := nodejs npm default-jdk-headless g++ golang-go r-base-core ruby python3-pip \
              python3-matplotlib python3-numpy python3-plotly python3-seaborn r-cran-ggplot2
# docker.io and podman (with catatonit, the init its containers get): the engines
# spec/02-integration/engine_spec.lua talks to (spec/run.sh starts them); curl:
# spec/support/engines.sh asks them whether they answer; busybox-static: the image the engine
# specs import; docker-registry: the loopback registry the image pull specs pull from;
# nginx-light + libnginx-mod-http-lua (+ lua-resty-core): the nginx that resty.llmbox and the
# OpenResty gateway example are tested in (spec/14-serve/resty_spec.lua); passt (pasta) and
# iproute2: egress (network mode "egress") and the little internet its spec makes
# (spec/02-integration/egress_spec.lua).
DEPS_TEST  := bubblewrap debootstrap lua-yaml python3-kubernetes lua-busted lua-check clang-format luarocks procps openssl curl docker.io podman catatonit docker-registry \
              busybox-static nginx-light libnginx-mod-http-lua lua-resty-core passt iproute2 $(DEPS_LANGS)

.PHONY: all deps deps-test demo test test-fresh k8s-standin print-deps-test print-deps-langs soak lint format install uninstall clean paths

# The Lua tree as LuaJIT bytecode (with debug info, so errors still name files and lines; -F: the
# source's path, from which modules find their files): the binary loads a module from it when it
# is not older than the source and names it (runtime/main.c), which takes ~1.4 ms where parsing
# the sources takes ~5 (llmbox run's start-up). `make install` compiles the installed tree.
LUA_SRC := $(shell find lua/llmbox -name '*.lua')
LUA_BC  := $(LUA_SRC:lua/%=build/lua/%)

# The Python recipe's files as bytecode beside them (__pycache__, PEP 552 pycs checked against
# the source's hash): a run writes them into the jail with the sources, so the interpreter there
# does not compile sitecustomize at every start (~1.8 ms of each Python run). An interpreter of
# another version, or a source that no longer matches, ignores them and compiles as before.
PY_HOOKS := $(wildcard lua/llmbox/recipes/python/*.py)
PY_STAMP := build/pyc.stamp

all: $(BIN) $(MODULE) $(HTTP_MODULE) $(WS_MODULE) $(RUN_HELPER) $(HELPER) $(READY) $(POD_FILTER) $(LUA_BC) $(PY_STAMP) paths

$(PY_STAMP): $(PY_HOOKS)
	@mkdir -p $(dir $@)
	@# (without python3 here there are no pycs, and no stamp: the next make tries again; runs
	@# meanwhile compile the hooks, as before)
	@if [ -x /usr/bin/python3 ]; then /usr/bin/python3 -c 'import os, py_compile, sys; [py_compile.compile(f, dfile=os.path.basename(f), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH) for f in sys.argv[1:]]' $^ && touch $@; fi

build/lua/%.lua: lua/%.lua
	@mkdir -p $(dir $@)
	@luajit -bg -F $(CURDIR)/$< $< $@

build/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The helper's job format names the sources it was built from (runtime/chain_wire.c)
WIRE_ID = -DLB_WIRE_ID='"$(shell cat $(HEADERS) runtime/chain_wire.c | sha256sum | cut -c1-16)"'
build/obj/runtime/chain_wire.o: ALL_CFLAGS += $(WIRE_ID)
build/obj-musl/runtime/chain_wire.o: HELPER_CFLAGS += $(WIRE_ID)

build/obj-musl/%.o: %.c $(HEADERS) | $(MUSL_INC)
	@mkdir -p $(dir $@)
	$(HELPER_CC) $(HELPER_CFLAGS) -c -o $@ $<

build/musl-include:
	@mkdir -p $@
	ln -sfn /usr/include/linux $@/linux
	ln -sfn /usr/include/asm-generic $@/asm-generic
	ln -sfn /usr/include/$(shell $(CC) -print-multiarch)/asm $@/asm

$(BIN): build/obj/runtime/main.o $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS) $(DEP_LIBS) $(LUA_LIBS) -Wl,-E

# The module resolves lua_* from the host process (luajit, nginx): do not link libluajit into it.
$(MODULE): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $^ $(ALL_LDFLAGS) $(DEP_LIBS)

$(HTTP_MODULE): $(HTTP_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $^ $(ALL_LDFLAGS) $(CURL_LIBS)

$(WS_MODULE): $(WS_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $^ $(ALL_LDFLAGS) $(WS_LIBS)

$(RUN_HELPER_LIB): $(RUN_HELPER_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(RUN_HELPER): $(HELPER_OBJDIR)/runtime/run_helper.o $(RUN_HELPER_LIB)
	@mkdir -p $(dir $@)
	$(HELPER_CC) $(HELPER_CFLAGS) -static -s -o $@ $^ $(ALL_LDFLAGS)

$(HELPER): backends/container_exec.c | $(MUSL_INC)
	@mkdir -p $(dir $@)
	$(HELPER_CC) $(STATIC_CFLAGS) -static -s -o $@ $<

$(POD_FILTER): backends/pod_filter.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -Os -ffreestanding -fno-builtin -fno-stack-protector -fno-pie -no-pie \
		-fno-asynchronous-unwind-tables -fno-tree-loop-distribute-patterns -nostdlib -static -s \
		-Wl,--build-id=none -Wl,-z,noseparate-code -Wl,-z,norelro -o $@ $<

$(READY): backends/jail_ready.c | $(MUSL_INC)
	@mkdir -p $(dir $@)
	$(HELPER_CC) $(STATIC_CFLAGS) -static -s -o $@ $<

paths:
	@echo "llmbox built. Use it from plain LuaJIT with:"
	@echo "  LUA_PATH='$(CURDIR)/lua/?.lua;$(CURDIR)/lua/?/init.lua;;' LUA_CPATH='$(CURDIR)/build/lib/?.so;;' luajit -e 'local llmbox = require \"llmbox\"'"

# Installs missing Debian packages (as root); an ordinary user gets the apt-get line to run.
deps:
	@./.ci/deps.sh $(DEPS_BUILD)

# The MCP specs drive `llmbox mcp` with the official MCP SDK and agent frameworks from npm
# (versions pinned by each package-lock.json).
NPM_DIRS := spec/support/mcp examples/agents

deps-test:
	@./.ci/deps.sh $(DEPS_BUILD) $(DEPS_TEST)
	@# kubectl for the Kubernetes stand-in's specs: Debian's, unless one is installed already (a
	@# cloud SDK's kubectl conflicts with the kubernetes-client package)
	@command -v kubectl >/dev/null || ./.ci/deps.sh kubernetes-client
	@for d in $(NPM_DIRS); do \
		[ $$d/node_modules/.package-lock.json -nt $$d/package-lock.json ] || npm ci --prefix $$d --no-audit --no-fund --loglevel=error || exit 1; \
	done

demo: deps
	@$(MAKE) --no-print-directory all >/dev/null
	@echo '$$ llmbox run -l python -c "import sys, platform; print(...)"'
	@$(BIN) run -l python -c 'import os, platform, sys; print("hello from", platform.python_implementation(), sys.version.split()[0]); print("uid", os.getuid(), "pid", os.getpid(), "cwd", os.getcwd()); print("sum of squares:", sum(i * i for i in range(10)))'
	@echo '$$ llmbox run --json -t 2 -l python -c "while True: pass"'
	@$(BIN) run --json -t 2 -l python -c 'while True: pass' || true
	@echo

test: deps-test
	@$(MAKE) --no-print-directory all >/dev/null
	@./spec/run.sh

# The Kubernetes stand-in (spec/support/k8s_standin.py) in the foreground, on loopback: it writes
# build/k8s/kubeconfig; then `KUBECONFIG=build/k8s/kubeconfig llmbox run -b kubernetes -p kubernetes
# --image any -c 'print(1)'` runs in its pods (native jails of this host). Root, or a user that
# can run the native backend.
k8s-standin: all
	@mkdir -p build/k8s && rm -f build/k8s/kubeconfig
	@echo "k8s-standin: serving on loopback; KUBECONFIG=$(CURDIR)/build/k8s/kubeconfig (Ctrl-C stops it)"
	@/usr/bin/python3 spec/support/k8s_standin.py build/k8s

# The README's commands from a clean clone of HEAD inside a fresh Debian 12 root (debootstrap
# --variant=minbase, cached; entered with pivot_root in a new mount namespace). Root only. See
# .ci/fresh-root.sh.
test-fresh:
	@./.ci/fresh-root.sh

# The languages' packages, for spec/support/langs_image.py (the container backends' test image).
print-deps-langs:
	@echo $(DEPS_LANGS)

# What `make test` installs, for spec/04-install/deps_spec.lua.
print-deps-test:
	@echo $(DEPS_BUILD) $(DEPS_TEST)

# Longer than the soak spec: WORKERS x RUNS fresh sandboxes at once, then a check for leftovers.
SOAK_WORKERS ?= 8
SOAK_RUNS ?= 500
soak: deps-test
	@$(MAKE) --no-print-directory all >/dev/null
	@./spec/support/soak.sh $(SOAK_WORKERS) $(SOAK_RUNS)

lint: deps-test
	@luacheck -q --formatter plain lua policies spec bench examples && echo "luacheck (.luacheckrc): ok"
	@echo "clang-format check"
	@clang-format --dry-run --Werror $(CORE_SRC) $(HTTP_SRC) $(WS_SRC) runtime/main.c runtime/run_helper.c backends/container_exec.c backends/jail_ready.c backends/pod_filter.c $(HEADERS)
	@$(MAKE) --no-print-directory clean >/dev/null
	@$(MAKE) --no-print-directory all CFLAGS="-O2 -g" >/dev/null && echo "build with -Wall -Wextra -Werror: ok"

format:
	clang-format -i $(CORE_SRC) $(HTTP_SRC) $(WS_SRC) runtime/main.c runtime/run_helper.c backends/container_exec.c backends/jail_ready.c backends/pod_filter.c $(HEADERS)

install: $(BIN) $(MODULE) $(HTTP_MODULE) $(WS_MODULE) $(RUN_HELPER) $(HELPER) $(READY) $(POD_FILTER) $(PY_STAMP)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/llmbox $(DESTDIR)$(LUADIR) $(DESTDIR)$(DATADIR)/policies/pools
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/llmbox
	install -m 0755 $(MODULE) $(DESTDIR)$(LIBDIR)/llmbox/core.so
	install -m 0755 $(HTTP_MODULE) $(DESTDIR)$(LIBDIR)/llmbox/http_core.so
	install -m 0755 $(WS_MODULE) $(DESTDIR)$(LIBDIR)/llmbox/ws_core.so
	install -m 0755 $(RUN_HELPER) $(DESTDIR)$(LIBDIR)/llmbox/llmbox-run
	install -m 0755 $(HELPER) $(DESTDIR)$(LIBDIR)/llmbox/container-exec
	install -m 0755 $(READY) $(DESTDIR)$(LIBDIR)/llmbox/jail-ready
	install -m 0755 $(POD_FILTER) $(DESTDIR)$(LIBDIR)/llmbox/pod-filter
	cd lua && find llmbox -type d -exec install -d $(DESTDIR)$(LUADIR)/{} \;
	cd lua && find llmbox -type f -exec install -m 0644 {} $(DESTDIR)$(LUADIR)/{} \;
	cd $(DESTDIR)$(LUADIR) && find llmbox -name '*.lua' | while read -r f; do \
		install -d "$(DESTDIR)$(LIBDIR)/llmbox/bc/$$(dirname "$$f")" && \
		luajit -bg -F "$(LUADIR)/$$f" "$$f" "$(DESTDIR)$(LIBDIR)/llmbox/bc/$$f" || exit 1; done
	install -d $(DESTDIR)$(LUADIR)/resty
	install -m 0644 lua/resty/llmbox.lua $(DESTDIR)$(LUADIR)/resty/llmbox.lua
	install -m 0644 policies/*.lua $(DESTDIR)$(DATADIR)/policies/
	install -m 0644 policies/pools/*.lua $(DESTDIR)$(DATADIR)/policies/pools/

uninstall:
	rm -rf $(DESTDIR)$(BINDIR)/llmbox $(DESTDIR)$(LIBDIR)/llmbox $(DESTDIR)$(LUADIR)/llmbox $(DESTDIR)$(DATADIR)
	rm -f $(DESTDIR)$(LUADIR)/resty/llmbox.lua

clean:
	rm -rf build lua/llmbox/recipes/python/__pycache__

# make bench: latency, throughput and memory of fresh Python sandboxes next to bare python3, bwrap,
# docker and podman; writes bench/results/ (see bench/README.md). BENCH_QUICK=1: fewer iterations.
# BENCH_DOCKER=1 also installs docker.io + debootstrap + podman for the engine rows; BENCH_DOCKER=0
# skips them (BENCH_PODMAN=0: podman's only).
DEPS_BENCH := bubblewrap gnuplot-nox python3 curl $(if $(filter 1,$(BENCH_DOCKER)),docker.io debootstrap podman catatonit)
.PHONY: bench
bench:
	@./.ci/deps.sh $(DEPS_BUILD) $(DEPS_BENCH)
	@$(MAKE) --no-print-directory all >/dev/null
	@./bench/run.sh

include fuzz/fuzz.mk
