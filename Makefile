# CodeXray build. Everything lands in build/ (build-ARCH/ when cross-built).
#   make          build the agent (installs missing Debian packages first)
#   make ARCH=arm64   the agent and the server for aarch64 in build-arm64/, with
#                 Debian's cross compiler (on an arm64 host plain make is native)
#   make test     unit tests, integration tests (root, real BPF), the deploy and docs checks
#   make test-install   Docker, Podman, systemd (nspawn) and the Kubernetes manifest, for real
#   make test-kernels   the agent under qemu on Debian's kernels (KERNELS="5.10 6.1 6.12 sid")
#   make test-arm64     the arm64 agent under qemu-system-aarch64 on Debian's arm64 6.1 and 6.12
#   make deps     install the Debian packages the build and tests need
#   make run      the server and the agent of this checkout (RUN_FLAGS=--port 8081)
#   make bench    the benchmark report (make bench-ui: the web UI's part only;
#                 make bench-fleet: a simulated fleet over ClickHouse, FLEET_S=600)
#   make deb      Debian packages of the agent and the server in build/deb (ARCH=arm64: arm64's)
#   make format   clang-format every source file (make format-check: and no stray
#                 *.orig, *.rej or editor back-up file tracked)

# The first rule below is not `all`: name the goal a bare `make` builds.
.DEFAULT_GOAL := all

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
CLANG ?= clang
BPFTOOL ?= bpftool

# The target architecture, in the kernel's spelling (x86, arm64: BPF's
# __TARGET_ARCH_*): the host's unless ARCH=arm64 (or aarch64) is given. A
# build for another architecture goes to build-ARCH/ with Debian's cross
# compiler, which finds the arm64 -dev packages (tools/deps.sh) in
# /usr/lib/aarch64-linux-gnu and /usr/include/aarch64-linux-gnu on its own;
# the tools that run during the build (protoc-c, bpftool, clang -target bpf,
# xxd) are the host's.
HOST_ARCH := $(shell uname -m | sed 's/x86_64/x86/; s/aarch64/arm64/')
ARCH := $(HOST_ARCH)
override ARCH := $(patsubst aarch64,arm64,$(patsubst x86_64,x86,$(ARCH)))
ifeq ($(ARCH),$(HOST_ARCH))
B := build
CROSS :=
# make's built-in default (cc) or the environment's; gcc unless CC= is given.
ifeq ($(origin CC),default)
CC := gcc
endif
else ifeq ($(ARCH),arm64)
B := build-arm64
CROSS := aarch64-linux-gnu-
ifneq ($(filter default environment,$(origin CC)),)
CC := $(CROSS)gcc
endif
else
$(error ARCH=$(ARCH): this host ($(HOST_ARCH)) builds for itself or, cross, for arm64)
endif
# Runs a program built for ARCH (the unit tests): qemu-user when cross-built.
RUN_TARGET := $(if $(CROSS),qemu-aarch64-static -L /usr/aarch64-linux-gnu)

# Where vmlinux.h comes from: the running kernel's BTF for a native build;
# for a cross build the BTF of Debian's newest kernel of VMLINUX_SERIES for
# ARCH, fetched once into KERNELS_CACHE (tools/kernels/btf.sh; offline once
# cached). CO-RE relocates every field the BPF object reads on the kernel it
# runs on, so one kernel's header serves them all. VMLINUX_BTF=FILE
# overrides both.
KERNELS_CACHE ?= /var/cache/codexray-kernels
VMLINUX_SERIES ?= 6.1
VMLINUX_BTF ?= $(if $(CROSS),,/sys/kernel/btf/vmlinux)

WARN := -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS ?= -O2 -g
# Frame pointers in our own code: a profiler should be easy to profile.
# (x86_64 and aarch64 gcc both take -mno-omit-leaf-frame-pointer.)
CFLAGS += -std=gnu11 $(WARN) -D_GNU_SOURCE -pthread -fno-strict-aliasing \
          -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
          -DCODEXRAY_VERSION='"$(VERSION)"' -I$(B) -I$(B)/gen -I/usr/include/elfutils
LDLIBS := -lbpf -ldw -ldebuginfod -lelf -lz -ldeflate -lzstd -lprotobuf-c -liberty -lcurl -lpthread
SERVER_LDLIBS := -lmicrohttpd -lcurl -lsqlite3 -ldebuginfod -lelf -lz -ldeflate -lzstd -lprotobuf-c -lpthread -lm

COMMON_SRC := common/log.c common/buf.c common/arena.c common/hmap.c common/gz.c common/config.c \
              common/json.c common/pprof/pprof_writer.c common/pprof/pprof_reader.c \
              common/zst.c common/debugfile.c common/batch.c common/list.c
AGENT_SRC := agent/procs/maps.c agent/procs/procs.c agent/procs/identity.c \
             agent/procs/cmdline_name.c agent/procs/json_scan.c agent/procs/podman_meta.c \
             agent/procs/cgroup_id.c agent/procs/runtime_roots.c agent/procs/container_meta.c \
             agent/node.c agent/preflight.c \
             agent/symbolize/binary.c agent/symbolize/kallsyms.c agent/symbolize/demangle.c \
             agent/symbolize/symbolizer.c agent/symbolize/symbolizer_dwarf.c agent/symbolize/symtab.c agent/symbolize/dwarf_scopes.c \
             agent/symbolize/gopclntab.c agent/symbolize/plt.c \
             agent/symbolize/debuginfod.c agent/symbolize/debuglink.c \
             agent/symbolize/debugplain.c \
             agent/symbolize/symbolizer_debuginfod.c \
             agent/unwind/cfi_table.c agent/unwind/cfi_fde.c agent/unwind/cfi_rows.c agent/unwind/cfi_exec.c \
             agent/unwind/cfi_section.c agent/unwind/cfi_stats.c agent/unwind/cfi_arm64.c \
             agent/unwind/pac_mask.c \
             agent/unwind/go_table.c agent/unwind/unwinder.c agent/unwind/unwinder_tables.c agent/unwind/cfi_blocks.c \
             agent/unwind/file_unwind.c \
             agent/runtimes/runtimes.c agent/runtimes/proc_mem.c \
             agent/runtimes/jit/jit.c agent/runtimes/jit/perfmap.c agent/runtimes/jit/jvm_attach.c \
             agent/runtimes/python/python.c agent/runtimes/python/py_detect.c \
             agent/runtimes/python/py_layout.c agent/runtimes/python/py_layout_table.c \
             agent/runtimes/python/py_code.c agent/runtimes/python/py_lines.c \
             agent/runtimes/v8/v8.c agent/runtimes/v8/v8_detect.c agent/runtimes/v8/v8_fn.c \
             agent/runtimes/hotspot/hotspot.c agent/runtimes/hotspot/hs_vm.c \
             agent/runtimes/hotspot/hs_name.c \
             agent/aggregate.c agent/offcpu.c agent/offduty.c agent/offhook.c agent/profile.c agent/profile_cache.c agent/output.c agent/dither.c agent/spool.c
AGENT_MAIN := agent/ring.c agent/sampler.c agent/collect.c agent/worker.c agent/ship.c agent/ship_http.c agent/main.c agent/cli.c \
              agent/record.c agent/cli_debuginfod.c
SERVER_SRC := server/store_common.c server/ch_sql.c server/store_clickhouse.c \
              server/store_clickhouse_rw.c server/store_clickhouse_batch.c server/store_clickhouse_group.c \
              server/store_clickhouse_rollup.c \
              server/store_clickhouse_names.c server/store_clickhouse_schema.c \
              server/store_clickhouse_frames.c server/store_clickhouse_warm.c \
              server/store_clickhouse_shards.c server/ch_shard.c \
              server/store_clickhouse_upgrade.c \
              server/store_sqlite.c server/store_sqlite_put.c server/store_sqlite_read.c \
              server/store_sqlite_maint.c server/stack_key.c server/ingest.c server/ingest_work.c server/query.c server/query_flame.c server/query_focus.c server/query_search.c \
              server/http.c server/http_api.c server/breakdown.c server/http_batch.c server/http_pyroscope.c \
              server/http_connect.c server/connect_req.c server/connect_scope.c server/connect_flame.c server/pyroscope.c server/text.c \
              server/budget.c server/pprof_ids.c server/debuginfod.c \
              server/store_sqlite_fn.c server/fn_timeline.c
SERVER_MAIN := server/main.c

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
PB_OBJ := $(B)/obj/gen/profile.pb-c.o
QUERIER_PB_OBJ := $(B)/obj/gen/querier/v1/querier.pb-c.o $(B)/obj/gen/types/v1/types.pb-c.o

# The version compiled in (CODEXRAY_VERSION, git describe): the objects that
# print it are built again when it changes (a commit, an edit that makes the
# tree dirty), so that a package never holds a binary of another version
# (tools/deb/build.sh refuses one). The stamp is rewritten only then.
$(B)/version.stamp: FORCE
	@mkdir -p $(B)
	@echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@
$(call obj,agent/main.c server/main.c): $(B)/version.stamp
.PHONY: FORCE
FORCE:

.PHONY: all deps run test unit sanitize fuzz fuzz-check integration deploy-check docs-check test-install \
        test-runtimes test-kernels test-arm64 bench bench-ui bench-fleet format format-check clean
all: deps $(B)/codexray-node-agent $(B)/codexray-server

# The packages come before anything that needs their tools or headers:
# every rule that compiles, generates or links waits for deps (an order-only
# prerequisite: it orders, and rebuilds nothing), so `make -j2 all` on a fresh
# machine does not compile beside the install of protoc-c. deps.sh takes a
# quarter of a second when everything is there.
# DEPS_SH: tests/deploy's parallel-build check puts a slow stand-in here.
DEPS_SH ?= tools/deps.sh
deps:
	@$(DEPS_SH)

# The server (store in ./data) and the agent shipping to it; Ctrl-C stops both.
RUN_FLAGS ?=
run: all
	@tools/run.sh $(RUN_FLAGS)

# --- BPF: vmlinux.h (see VMLINUX_BTF), object, skeleton ---
# The skeleton (bpftool, the host's) only embeds the object: the object is
# all that is ARCH's.
$(B)/vmlinux.h: | deps
	@mkdir -p $(B)
	btf='$(VMLINUX_BTF)'; \
	if [ -z "$$btf" ]; then btf=$$(tools/kernels/btf.sh $(KERNELS_CACHE) $(ARCH) $(VMLINUX_SERIES)) || exit 1; fi; \
	$(BPFTOOL) btf dump file "$$btf" format c > $@.tmp && mv $@.tmp $@

$(B)/sampler.bpf.o: agent/bpf/sampler.bpf.c agent/bpf/sample.h agent/bpf/arch.bpf.h \
                   agent/bpf/arch_x86.bpf.h agent/bpf/arch_arm64.bpf.h \
                   agent/bpf/unwind.h agent/bpf/unwind.bpf.h agent/bpf/python.h \
                   agent/bpf/python.bpf.h agent/bpf/offcpu.bpf.h agent/bpf/v8.h agent/bpf/v8.bpf.h \
                   agent/bpf/hotspot.h agent/bpf/hotspot.bpf.h $(B)/vmlinux.h | deps
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(B) -Iagent/bpf -Wall -Werror -c $< -o $@

$(B)/sampler.skel.h: $(B)/sampler.bpf.o | deps
	$(BPFTOOL) gen skeleton $< name sampler_bpf > $@.tmp && mv $@.tmp $@

# --- profile.proto -> protobuf-c (protoc-c, the host's) ---
$(B)/gen/profile.pb-c.c $(B)/gen/profile.pb-c.h: common/pprof/profile.proto | deps
	@mkdir -p $(B)/gen
	protoc-c --proto_path=common/pprof --c_out=$(B)/gen $<

$(PB_OBJ): $(B)/gen/profile.pb-c.c | deps
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -I$(B)/gen -c $< -o $@

# --- Pyroscope's querier API (the subset in server/proto) -> protobuf-c ---
QUERIER_PROTO := server/proto/querier/v1/querier.proto server/proto/types/v1/types.proto
$(B)/gen/querier/v1/querier.pb-c.c $(B)/gen/querier/v1/querier.pb-c.h \
$(B)/gen/types/v1/types.pb-c.c $(B)/gen/types/v1/types.pb-c.h &: $(QUERIER_PROTO) | deps
	@mkdir -p $(B)/gen
	protoc-c --proto_path=server/proto --c_out=$(B)/gen $(QUERIER_PROTO)

$(QUERIER_PB_OBJ): $(B)/obj/gen/%.pb-c.o: $(B)/gen/%.pb-c.c $(B)/gen/querier/v1/querier.pb-c.h | deps
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -I$(B)/gen -c $< -o $@

$(B)/obj/server/http_connect.o $(B)/obj/server/connect_req.o: $(B)/gen/querier/v1/querier.pb-c.h

# --- C objects (header dependencies tracked by -MMD) ---
$(B)/obj/%.o: %.c $(B)/gen/profile.pb-c.h | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/obj/agent/sampler.o: $(B)/sampler.skel.h

$(B)/codexray-node-agent: $(call obj,$(COMMON_SRC) $(AGENT_SRC) $(AGENT_MAIN)) $(PB_OBJ) | deps
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# --- the web UI, embedded in the server (tools/embed_ui.sh) ---
UI_JS := app.js router.js api.js dom.js widgets.js page_apps.js page_app.js table.js \
         flamegraph.js classify.js colors.js tree.js layout.js search.js diff.js sandwich.js breakdown.js breakdown_view.js format.js range.js render.js \
         value_type.js fn_timeline.js fn_timeline_view.js graft.js
UI_FILES := server/ui/index.html $(addprefix server/ui/,$(UI_JS)) server/ui/style.css server/ui/favicon.svg
UI_OBJ := $(B)/obj/gen/ui_assets.o
$(B)/gen/ui_assets.c: $(UI_FILES) tools/embed_ui.sh | deps
	@mkdir -p $(dir $@)
	tools/embed_ui.sh $@ $(UI_FILES)

$(UI_OBJ): $(B)/gen/ui_assets.c server/ui_assets.h | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iserver -c $< -o $@

$(B)/obj/server/http.o: server/ui_assets.h

$(B)/codexray-server: $(call obj,$(COMMON_SRC) $(SERVER_SRC) $(SERVER_MAIN)) $(PB_OBJ) $(QUERIER_PB_OBJ) $(UI_OBJ) | deps
	$(CC) $(CFLAGS) -o $@ $^ $(SERVER_LDLIBS)

# The arm64 binaries from a plain make on another host (make test-arm64
# needs the agent): a make of their own with ARCH=arm64, which decides B, CC
# and vmlinux.h's source when it reads this file.
ifeq ($(CROSS)$(HOST_ARCH),x86)
build-arm64/codexray-node-agent build-arm64/codexray-server: FORCE
	@$(MAKE) --no-print-directory ARCH=arm64 $@
endif

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)

# --- Debian packages of $(B)'s binaries into build/deb (tools/deb/build.sh):
# make deb (amd64 here), make ARCH=arm64 deb (from build-arm64/) ---
DEB_ARCH = $(if $(filter arm64,$(ARCH)),arm64,amd64)
.PHONY: deb
deb: $(B)/codexray-node-agent $(B)/codexray-server | deps
	tools/deb/build.sh --build-dir $(B) --arch $(DEB_ARCH) --version $(VERSION) --out build/deb

# --- tests ---
include tests/tests.mk

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')
	@tools/tree_check.sh

clean:
	rm -rf $(B)
