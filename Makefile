# CodeXray build. Everything lands in build/.
#   make          build the agent (installs missing Debian packages first)
#   make test     unit tests, integration tests (root, real BPF), the deploy and docs checks
#   make test-install   Docker, Podman, systemd (nspawn) and the Kubernetes manifest, for real
#   make test-kernels   the agent under qemu on Debian's kernels (KERNELS="5.10 6.1 6.12 sid")
#   make deps     install the Debian packages the build and tests need
#   make run      the server and the agent of this checkout (RUN_FLAGS=--port 8081)
#   make bench    the benchmark report (make bench-ui: the web UI's part only)
#   make deb      Debian packages of the agent and the server in build/deb (ARCH=arm64: arm64's)
#   make format   clang-format every source file

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
B := build
CC ?= gcc
CLANG ?= clang
BPFTOOL ?= bpftool
ARCH := $(shell uname -m | sed 's/x86_64/x86/; s/aarch64/arm64/')

WARN := -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS ?= -O2 -g
# Frame pointers in our own code: a profiler should be easy to profile.
CFLAGS += -std=gnu11 $(WARN) -D_GNU_SOURCE -pthread -fno-strict-aliasing \
          -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
          -DCODEXRAY_VERSION='"$(VERSION)"' -I$(B) -I$(B)/gen -I/usr/include/elfutils
LDLIBS := -lbpf -ldw -ldebuginfod -lelf -lz -ldeflate -lzstd -lprotobuf-c -liberty -lcurl -lpthread
SERVER_LDLIBS := -lmicrohttpd -lcurl -lsqlite3 -ldebuginfod -lelf -lz -ldeflate -lzstd -lprotobuf-c -lpthread -lm

COMMON_SRC := common/log.c common/buf.c common/hmap.c common/gz.c common/config.c \
              common/json.c common/pprof/pprof_writer.c common/pprof/pprof_reader.c \
              common/zst.c common/debugfile.c common/batch.c
AGENT_SRC := agent/procs/maps.c agent/procs/procs.c agent/procs/identity.c \
             agent/procs/json_scan.c agent/procs/podman_meta.c agent/procs/cgroup_id.c \
             agent/node.c agent/preflight.c \
             agent/symbolize/binary.c agent/symbolize/kallsyms.c agent/symbolize/demangle.c \
             agent/symbolize/symbolizer.c agent/symbolize/symtab.c agent/symbolize/dwarf_scopes.c \
             agent/symbolize/gopclntab.c agent/symbolize/plt.c \
             agent/symbolize/debuginfod.c agent/symbolize/debuglink.c \
             agent/symbolize/symbolizer_debuginfod.c \
             agent/unwind/cfi_table.c agent/unwind/cfi_fde.c agent/unwind/cfi_rows.c agent/unwind/cfi_exec.c \
             agent/unwind/cfi_section.c agent/unwind/cfi_stats.c \
             agent/unwind/go_table.c agent/unwind/unwinder.c agent/unwind/unwinder_tables.c \
             agent/unwind/file_unwind.c \
             agent/runtimes/runtimes.c \
             agent/runtimes/jit/jit.c agent/runtimes/jit/perfmap.c agent/runtimes/jit/jvm_attach.c \
             agent/runtimes/python/python.c agent/runtimes/python/py_detect.c \
             agent/runtimes/python/py_layout.c agent/runtimes/python/py_layout_table.c \
             agent/runtimes/python/py_code.c agent/runtimes/python/py_lines.c \
             agent/aggregate.c agent/profile.c agent/output.c agent/dither.c agent/spool.c
AGENT_MAIN := agent/sampler.c agent/collect.c agent/worker.c agent/ship.c agent/ship_http.c agent/main.c agent/cli.c \
              agent/record.c agent/cli_debuginfod.c
SERVER_SRC := server/store_common.c server/ch_sql.c server/store_clickhouse.c \
              server/store_clickhouse_rw.c server/store_clickhouse_batch.c server/store_clickhouse_rollup.c \
              server/store_clickhouse_names.c server/store_clickhouse_schema.c \
              server/store_clickhouse_frames.c \
              server/store_sqlite.c server/store_sqlite_put.c server/store_sqlite_read.c \
              server/store_sqlite_maint.c server/stack_key.c server/ingest.c server/ingest_work.c server/query.c \
              server/http.c server/http_api.c server/http_batch.c server/text.c server/budget.c server/pprof_ids.c server/debuginfod.c
SERVER_MAIN := server/main.c

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
PB_OBJ := $(B)/obj/gen/profile.pb-c.o

.PHONY: all deps run test unit sanitize fuzz fuzz-check integration deploy-check docs-check test-install \
        test-kernels bench bench-ui format format-check clean
all: deps $(B)/codexray-node-agent $(B)/codexray-server

deps:
	@tools/deps.sh

# The server (store in ./data) and the agent shipping to it; Ctrl-C stops both.
RUN_FLAGS ?=
run: all
	@tools/run.sh $(RUN_FLAGS)

# --- BPF: vmlinux.h from the running kernel's BTF, object, skeleton ---
$(B)/vmlinux.h:
	@mkdir -p $(B)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(B)/sampler.bpf.o: agent/bpf/sampler.bpf.c agent/bpf/sample.h agent/bpf/arch_x86.bpf.h \
                   agent/bpf/unwind.h agent/bpf/unwind.bpf.h agent/bpf/python.h \
                   agent/bpf/python.bpf.h $(B)/vmlinux.h
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(B) -Iagent/bpf -Wall -Werror -c $< -o $@

$(B)/sampler.skel.h: $(B)/sampler.bpf.o
	$(BPFTOOL) gen skeleton $< name sampler_bpf > $@.tmp && mv $@.tmp $@

# --- profile.proto -> protobuf-c ---
$(B)/gen/profile.pb-c.c $(B)/gen/profile.pb-c.h: common/pprof/profile.proto
	@mkdir -p $(B)/gen
	protoc-c --proto_path=common/pprof --c_out=$(B)/gen $<

$(PB_OBJ): $(B)/gen/profile.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -I$(B)/gen -c $< -o $@

# --- C objects (header dependencies tracked by -MMD) ---
$(B)/obj/%.o: %.c $(B)/gen/profile.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/obj/agent/sampler.o: $(B)/sampler.skel.h

$(B)/codexray-node-agent: $(call obj,$(COMMON_SRC) $(AGENT_SRC) $(AGENT_MAIN)) $(PB_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# --- the web UI, embedded in the server (tools/embed_ui.sh) ---
UI_JS := app.js router.js api.js dom.js widgets.js page_apps.js page_app.js table.js \
         flamegraph.js classify.js colors.js tree.js layout.js search.js diff.js format.js range.js render.js
UI_FILES := server/ui/index.html $(addprefix server/ui/,$(UI_JS)) server/ui/style.css server/ui/favicon.svg
UI_OBJ := $(B)/obj/gen/ui_assets.o
$(B)/gen/ui_assets.c: $(UI_FILES) tools/embed_ui.sh
	@mkdir -p $(dir $@)
	tools/embed_ui.sh $@ $(UI_FILES)

$(UI_OBJ): $(B)/gen/ui_assets.c server/ui_assets.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iserver -c $< -o $@

$(B)/obj/server/http.o: server/ui_assets.h

$(B)/codexray-server: $(call obj,$(COMMON_SRC) $(SERVER_SRC) $(SERVER_MAIN)) $(PB_OBJ) $(UI_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(SERVER_LDLIBS)

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)

# --- Debian packages of $(B)'s binaries into build/deb (tools/deb/build.sh):
# make deb (amd64), make ARCH=arm64 deb ---
DEB_ARCH = $(if $(filter arm64,$(ARCH)),arm64,amd64)
.PHONY: deb
deb: deps $(B)/codexray-node-agent $(B)/codexray-server
	tools/deb/build.sh --build-dir $(B) --arch $(DEB_ARCH) --version $(VERSION) --out build/deb

# --- tests ---
include tests/tests.mk

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(B)
