# Unit tests: cmocka, no root, no BPF. One binary per module under test:
#   make build/tests/test_maps && build/tests/test_maps
UNIT_TESTS := test_hmap test_arena test_buf_gz test_json test_config test_maps test_pprof_writer test_kallsyms \
              test_symbolizer test_symtab test_dwarf_scopes test_gopclntab test_aggregate \
              test_identity test_identity_runtimes test_cmdline_name test_node test_perfmap test_jvm \
              test_cfi_table test_cfi_table_xcheck test_cfi_table_arm64 test_pac_mask \
              test_go_table test_pprof_reader test_stack_key test_py_lines test_py_layout \
              test_py_layout_hostile test_py_detect test_py_detect_hostile test_py_code \
               test_py_code_hostile test_dither test_plt test_file_unwind test_cfi_blocks test_unwinder_lazy test_query test_query_focus test_query_search test_varint \
               test_ingest test_store test_store_levels test_http test_http_pyroscope test_http_connect test_ch_sql test_ch_shard \
               test_store_common test_debugfile test_dbgsrv test_procs test_spool test_batch test_list \
               test_debuginfod test_debugplain test_offcpu test_offduty test_fn_timeline test_v8 test_hotspot
UNIT_BINS := $(addprefix $(B)/tests/,$(UNIT_TESTS))
UNIT_LIB_OBJS := $(call obj,$(COMMON_SRC) $(AGENT_SRC)) $(PB_OBJ)

$(B)/tests/%: tests/unit/%.c $(UNIT_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(LDLIBS) -lcmocka

# The server's stack keys: pure arithmetic, unit-tested like the rest.
$(B)/tests/test_stack_key: tests/unit/test_stack_key.c $(UNIT_LIB_OBJS) $(call obj,server/stack_key.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(call obj,server/stack_key.c) \
	    $(LDLIBS) -lcmocka

# The ClickHouse store's quoting and answer reading, and its reading of the
# --clickhouse list (the store itself, without a ClickHouse).
CH_TEST_OBJS := $(call obj,server/ch_sql.c server/store_clickhouse.c server/store_clickhouse_rw.c \
    server/store_clickhouse_batch.c server/store_clickhouse_group.c server/store_clickhouse_warm.c \
    server/store_clickhouse_names.c server/store_clickhouse_frames.c \
    server/store_clickhouse_rollup.c server/store_clickhouse_schema.c server/stack_key.c \
    server/store_clickhouse_upgrade.c server/store_common.c server/store_clickhouse_shards.c \
    server/ch_shard.c)
$(B)/tests/test_ch_shard: tests/unit/test_ch_shard.c tests/unit/ch_shard_vectors.h \
    tests/unit/ch_shard_keys.h $(UNIT_LIB_OBJS) $(call obj,server/ch_shard.c server/ch_sql.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(call obj,server/ch_shard.c server/ch_sql.c) $(LDLIBS) -lcmocka
$(B)/tests/test_ch_sql: tests/unit/test_ch_sql.c $(UNIT_LIB_OBJS) $(CH_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(CH_TEST_OBJS) $(LDLIBS) -lcmocka

# What the server's stores share.
$(B)/tests/test_store_common: tests/unit/test_store_common.c $(UNIT_LIB_OBJS) \
    $(call obj,server/store_common.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(call obj,server/store_common.c) \
	    $(LDLIBS) -lcmocka

# The server's queries: time ranges and the flame-graph tree.
$(B)/tests/test_query: tests/unit/test_query.c $(UNIT_LIB_OBJS) $(call obj,server/query.c server/query_flame.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(call obj,server/query.c server/query_flame.c) \
	    $(LDLIBS) -lcmocka

# The flame graph narrowed to a frame's subtree (focus=).
$(B)/tests/test_query_focus: tests/unit/test_query_focus.c $(UNIT_LIB_OBJS) $(call obj,server/query_focus.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(call obj,server/query_focus.c) \
	    $(LDLIBS) -lcmocka

# The search over every frame (search=), folded or not.
QUERY_SEARCH_OBJS := $(call obj,server/query.c server/query_flame.c server/query_search.c)
$(B)/tests/test_query_search: tests/unit/test_query_search.c $(UNIT_LIB_OBJS) $(QUERY_SEARCH_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(QUERY_SEARCH_OBJS) $(LDLIBS) -lcmocka

# The server's ingest, store and HTTP layer: a store in a temporary
# directory, a real loopback socket; any user.
SERVER_TEST_OBJS := $(call obj,server/ingest.c server/ingest_work.c server/stack_key.c server/store_common.c \
    server/store_sqlite.c server/store_sqlite_put.c server/store_sqlite_read.c \
    server/store_sqlite_maint.c server/store_sqlite_fn.c server/text.c server/budget.c server/pprof_ids.c \
    server/query.c server/query_flame.c server/query_focus.c server/query_search.c \
    server/debuginfod.c)
$(B)/tests/test_ingest $(B)/tests/test_store $(B)/tests/test_store_levels: $(B)/tests/%: tests/unit/%.c tests/unit/server_helpers.h \
    $(UNIT_LIB_OBJS) $(SERVER_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(SERVER_TEST_OBJS) $(LDLIBS) \
	    $(SERVER_LDLIBS) -lcmocka
# A function over time: the SQLite store's pass and the composed one.
FN_TIMELINE_OBJS := $(call obj,server/fn_timeline.c)
$(B)/tests/test_fn_timeline: tests/unit/test_fn_timeline.c tests/unit/server_helpers.h \
    $(UNIT_LIB_OBJS) $(SERVER_TEST_OBJS) $(FN_TIMELINE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(SERVER_TEST_OBJS) $(FN_TIMELINE_OBJS) \
	    $(LDLIBS) $(SERVER_LDLIBS) -lcmocka
HTTP_SRC := server/http.c server/http_api.c server/breakdown.c server/fn_timeline.c server/http_batch.c server/http_pyroscope.c \
            server/pyroscope.c server/http_connect.c server/connect_req.c server/connect_scope.c server/connect_flame.c
$(B)/tests/test_http $(B)/tests/test_http_pyroscope $(B)/tests/test_http_connect: $(B)/tests/%: \
    tests/unit/%.c tests/unit/server_helpers.h tests/unit/http_helpers.h $(UNIT_LIB_OBJS) \
    $(SERVER_TEST_OBJS) $(call obj,$(HTTP_SRC)) $(QUERIER_PB_OBJ) $(UI_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(SERVER_TEST_OBJS) \
	    $(call obj,$(HTTP_SRC)) $(QUERIER_PB_OBJ) $(UI_OBJ) $(LDLIBS) $(SERVER_LDLIBS) -lcmocka

# The server's debuginfod paths.
$(B)/tests/test_dbgsrv: tests/unit/test_dbgsrv.c $(UNIT_LIB_OBJS) $(call obj,server/debuginfod.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_LIB_OBJS) $(call obj,server/debuginfod.c) \
	    $(LDLIBS) -lcmocka
$(B)/tests/test_debugfile: $(B)/fixtures/debuglink_c $(B)/fixtures/cxx
# Helpers shared by a test split in two (header-only, not seen by the pattern rule).
$(B)/tests/test_py_code $(B)/tests/test_py_code_hostile: tests/unit/py_code_helpers.h

# V8's postmortem constants in shared objects for test_v8 to read: as node
# 20 exports them, with pointer compression, with one left out, as node 24.
V8DBG_SOS := $(B)/tests/v8dbg_fake.so $(B)/tests/v8dbg_ptrcomp.so $(B)/tests/v8dbg_noscript.so \
    $(B)/tests/v8dbg_v13.so
$(B)/tests/v8dbg_fake.so: tests/unit/v8dbg_fake.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -o $@ $<
$(B)/tests/v8dbg_ptrcomp.so: tests/unit/v8dbg_fake.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -DTAGGED=4 -o $@ $<
$(B)/tests/v8dbg_noscript.so: tests/unit/v8dbg_fake.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -DNO_SCRIPT_NAME -o $@ $<
$(B)/tests/v8dbg_v13.so: tests/unit/v8dbg_fake.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -DV8_13 -o $@ $<
$(B)/tests/test_v8: tests/unit/test_v8.c $(UNIT_LIB_OBJS) $(V8DBG_SOS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -DTEST_SO_DIR='"$(abspath $(B))/tests"' -o $@ $< \
	    $(UNIT_LIB_OBJS) $(LDLIBS) -lcmocka
$(B)/tests/test_py_detect $(B)/tests/test_py_detect_hostile: tests/unit/py_detect_helpers.h
$(B)/tests/test_py_detect $(B)/tests/test_py_layout_hostile: tests/unit/py_layout_headers.h
$(B)/tests/test_identity $(B)/tests/test_identity_runtimes: tests/unit/identity_helpers.h

# Small binaries the symbolizer tests read: with frame pointers, inlined
# functions, C++, and stripped.
FIXTURES := $(B)/fixtures/fp_c $(B)/fixtures/inline_c $(B)/fixtures/cxx $(B)/fixtures/stripped_c \
            $(B)/fixtures/debuglink_c $(B)/fixtures/go_full $(B)/fixtures/go_stripped \
            $(B)/fixtures/go_a64
$(B)/fixtures/fp_c: tests/workloads/cpu_split.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FP_CFLAGS) -o $@ $<
$(B)/fixtures/inline_c: tests/unit/fixtures/inline.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -o $@ $<
$(B)/fixtures/cxx: tests/unit/fixtures/cxx.cc
	@mkdir -p $(dir $@)
	g++ -O1 -g -fno-omit-frame-pointer -o $@ $<
$(B)/fixtures/stripped_c: $(B)/fixtures/fp_c
	strip --strip-all -o $@ $<
# Stripped, with its symbols and DWARF in a separate file found by .gnu_debuglink.
$(B)/fixtures/debuglink_c: $(B)/fixtures/fp_c
	objcopy --only-keep-debug $< $(B)/fixtures/split.debug
	strip --strip-all -o $@.tmp $<
	cd $(B)/fixtures && objcopy --add-gnu-debuglink=split.debug $(notdir $@).tmp && mv $(notdir $@).tmp $(notdir $@)

# The CFI table tests' binaries: gcc without and with frame pointers, g++
# with exceptions, .debug_frame alone (plain and compressed), and rustc -O
# with Debian's rustc.
# Debian's rustc (tools/deps.sh installs it), not whatever is on PATH. Not
# tested for with $(wildcard) here: make reads this file before `make deps`
# installs rustc, so a fresh machine's first `make test` left it out.
RUSTC ?= /usr/bin/rustc
# The host's own gcc and objcopy where it is arm64.
A64_NATIVE := $(filter aarch64,$(shell uname -m))
A64CC ?= $(if $(A64_NATIVE),gcc,aarch64-linux-gnu-gcc)
A64OBJCOPY ?= $(if $(A64_NATIVE),objcopy,aarch64-linux-gnu-objcopy)
CFI_A64_FIXTURES := $(B)/fixtures/cfi_a64_fp $(B)/fixtures/cfi_a64_omit \
                    $(B)/fixtures/cfi_a64_pac $(B)/fixtures/cfi_a64_bkey \
                    $(B)/fixtures/cfi_a64_nocfi $(B)/fixtures/vdso_a64
CFI_FIXTURES := $(B)/fixtures/cfi_omit $(B)/fixtures/cfi_fp $(B)/fixtures/cfi_cxx \
                $(B)/fixtures/cfi_debug_frame $(B)/fixtures/cfi_debug_frame_z \
                $(B)/fixtures/cfi_rust $(CFI_A64_FIXTURES)
FIXTURES += $(CFI_FIXTURES)
$(B)/tests/test_cfi_table $(B)/tests/test_cfi_table_xcheck $(B)/tests/test_cfi_table_arm64: $(CFI_FIXTURES) \
    tests/unit/cfi_table_helpers.h
PLT_FIXTURES := $(B)/fixtures/plt_c $(B)/fixtures/plt_ibt $(B)/fixtures/plt_a64 \
                $(B)/fixtures/plt_a64_bti $(B)/fixtures/plt_a64_pac
$(B)/tests/test_plt: $(PLT_FIXTURES) $(B)/fixtures/plt_bigrela
FIXTURES += $(PLT_FIXTURES) $(B)/fixtures/plt_bigrela
$(B)/fixtures/plt_bigrela: tests/unit/fixtures/plt_bigrela.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -pie -fPIE -o $@ $<
# gcc's defaults (a PIE, lazy .plt and a .plt.got stub), and IBT stubs in
# .plt.sec as Ubuntu's and Fedora's defaults build them.
$(B)/fixtures/plt_c: tests/unit/fixtures/plt.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -o $@ $<
$(B)/fixtures/plt_ibt: tests/unit/fixtures/plt.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fcf-protection=full -Wl,-z,ibtplt -o $@ $<
# arm64 by the cross gcc (data: plt.c reads any machine's ELF): a PIE's
# 16-byte entries; BTI forced in a non-PIE, whose entries begin with
# `bti c` (24 bytes; ld warns that the crt objects lack the BTI note); and
# PAC-PLT in a PIE, autia1716 before each br (24 bytes).
$(B)/fixtures/plt_a64: tests/unit/fixtures/plt.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -o $@ $<
$(B)/fixtures/plt_a64_bti: tests/unit/fixtures/plt.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -no-pie -mbranch-protection=standard -Wl,-z,force-bti -o $@ $<
$(B)/fixtures/plt_a64_pac: tests/unit/fixtures/plt.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -mbranch-protection=standard -Wl,-z,pac-plt -o $@ $<
$(B)/tests/test_symtab: $(B)/fixtures/fp_c $(B)/fixtures/cxx $(B)/fixtures/cfi_omit
$(B)/tests/test_go_table: $(B)/fixtures/go_full $(B)/fixtures/go_stripped $(B)/fixtures/fp_c \
    $(B)/fixtures/go_a64
$(B)/tests/test_dwarf_scopes: $(B)/fixtures/inline_c $(B)/fixtures/cxx $(B)/fixtures/cfi_cxx
$(B)/fixtures/cfi_omit: tests/unit/fixtures/cfi.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -o $@ $<
$(B)/fixtures/cfi_fp: tests/unit/fixtures/cfi.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fno-omit-frame-pointer -o $@ $<
$(B)/fixtures/cfi_cxx: tests/unit/fixtures/cfi_cxx.cc
	@mkdir -p $(dir $@)
	g++ -O2 -g -o $@ $<
# No unwind tables: gcc writes .debug_frame instead; the .eh_frame that
# crt1.o and friends bring is removed, so .debug_frame is all there is.
$(B)/fixtures/cfi_debug_frame: tests/unit/fixtures/cfi.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables \
	    -o $@.tmp $<
	objcopy --remove-section=.eh_frame --remove-section=.eh_frame_hdr $@.tmp $@ && rm -f $@.tmp
$(B)/fixtures/cfi_debug_frame_z: $(B)/fixtures/cfi_debug_frame
	objcopy --compress-debug-sections=zlib $< $@
$(B)/fixtures/cfi_rust: tests/unit/fixtures/cfi_rust.rs
	@mkdir -p $(dir $@)
	$(RUSTC) -O -o $@ $<
# arm64 (data for the table builder, which reads any machine's ELF): the
# same source by Debian's cross gcc (gcc-aarch64-linux-gnu), with frame
# records and without, with pointer authentication (paciasp/autiasp and
# DW_CFA_AARCH64_negate_ra_state; BTI stubs in .plt, forced: ld warns that
# the crt objects lack the BTI note), and with the B key (augmentation 'B').
# (A64CC and CFI_A64_FIXTURES are set above, before the rules that need them.)
$(B)/fixtures/cfi_a64_fp: tests/unit/fixtures/cfi.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -g -fno-omit-frame-pointer -o $@ $<
$(B)/fixtures/cfi_a64_omit: tests/unit/fixtures/cfi.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -g -fomit-frame-pointer -o $@ $<
$(B)/fixtures/cfi_a64_pac: tests/unit/fixtures/cfi.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -g -fno-omit-frame-pointer -mbranch-protection=standard -Wl,-z,force-bti -o $@ $<
$(B)/fixtures/cfi_a64_bkey: tests/unit/fixtures/cfi.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -g -fno-omit-frame-pointer -mbranch-protection=pac-ret+b-key -o $@ $<
# No CFI at all, as arm64's vDSO: the stand-in (its leaves, a framed
# function, the trampoline; BTI and PAC as the kernel builds it), and a
# program stripped of its CFI (not the vDSO: refused).
$(B)/fixtures/vdso_a64: tests/unit/fixtures/vdso_a64.c
	@mkdir -p $(dir $@)
	$(A64CC) -O2 -fPIC -shared -nostdlib -fno-asynchronous-unwind-tables -fno-unwind-tables \
	    -mbranch-protection=pac-ret+leaf+bti -o $@.tmp $<
	$(A64OBJCOPY) --remove-section=.eh_frame --remove-section=.eh_frame_hdr $@.tmp $@ && rm -f $@.tmp
$(B)/fixtures/cfi_a64_nocfi: $(B)/fixtures/cfi_a64_omit
	$(A64OBJCOPY) --strip-debug --remove-section=.eh_frame --remove-section=.eh_frame_hdr $< $@

# CPython line tables as each interpreter on the machine writes them
# (tests/unit/fixtures/py_lines_dump.py): pyenv's 3.7 and later, and
# Debian's python3. Only those that exist; the test fails if there is none.
# Named <pyenv version>.txt and debian-python3.txt (its version is inside).
# pyenv: $PYENV_ROOT, else $HOME/.pyenv, else /root/.pyenv (CI runs as root,
# maybe without HOME); tests/unit/py_helpers.h looks in the same places.
PYENV_ROOT ?= $(or $(wildcard $(if $(HOME),$(HOME)/.pyenv)),/root/.pyenv)
# 3.7.16 -> 3.7
py_minor = $(word 1,$(subst ., ,$(1))).$(word 2,$(subst ., ,$(1)))
PY_LINES_PYENV := $(filter-out 3.0.% 3.1.% 3.2.% 3.3.% 3.4.% 3.5.% 3.6.%,$(notdir \
    $(wildcard $(PYENV_ROOT)/versions/3.*)))
PY_LINES_PYENV := $(foreach v,$(PY_LINES_PYENV),$(if \
    $(wildcard $(PYENV_ROOT)/versions/$(v)/bin/python$(call py_minor,$(v))),$(v)))
PY_LINES_FIXTURES := $(patsubst %,$(B)/fixtures/py_lines/%.txt,$(PY_LINES_PYENV)) \
    $(if $(wildcard /usr/bin/python3),$(B)/fixtures/py_lines/debian-python3.txt)
PY_LINES_SOURCES := $(wildcard tests/unit/fixtures/py_lines_*.py)
# Debian unstable's 3.14 and 3.15, where the root
# tests/integration/python_unstable_tests.py makes is (they need its libc:
# run inside it by chroot, so as root only). Named unstable-3.X.txt.
PY_UNSTABLE_ROOT ?= /var/cache/codexray-python/sid-python
PY_LINES_UNSTABLE := $(if $(filter 0,$(shell id -u)),$(foreach v,3.14 3.15,$(if \
    $(wildcard $(PY_UNSTABLE_ROOT)/usr/bin/python$(v)),$(v))))
PY_LINES_FIXTURES += $(patsubst %,$(B)/fixtures/py_lines/unstable-%.txt,$(PY_LINES_UNSTABLE))
$(B)/fixtures/py_lines/unstable-%.txt: $(PY_LINES_SOURCES)
	@mkdir -p $(dir $@)
	d=$$(mktemp -d $(PY_UNSTABLE_ROOT)/tmp/cx-lines.XXXXXX) && cp $(PY_LINES_SOURCES) $$d/ && \
	    chroot $(PY_UNSTABLE_ROOT) python$* /tmp/$$(basename $$d)/py_lines_dump.py > $@.tmp; \
	    rc=$$?; rm -rf "$$d"; [ $$rc = 0 ] && mv $@.tmp $@
FIXTURES += $(PY_LINES_FIXTURES)
$(B)/tests/test_py_lines: $(PY_LINES_FIXTURES)
$(B)/fixtures/py_lines/debian-python3.txt: $(PY_LINES_SOURCES)
	@mkdir -p $(dir $@)
	/usr/bin/python3 tests/unit/fixtures/py_lines_dump.py > $@.tmp && mv $@.tmp $@
$(B)/fixtures/py_lines/%.txt: $(PY_LINES_SOURCES)
	@mkdir -p $(dir $@)
	$(PYENV_ROOT)/versions/$*/bin/python$(call py_minor,$*) tests/unit/fixtures/py_lines_dump.py \
	    > $@.tmp && mv $@.tmp $@

# CPython's layouts as each installed pyenv 3.7+ version's headers give them
# (tools/python_layout.sh --one), for test_py_layout to compare with the
# table (up to 3.12) and with what the interpreter's _Py_DebugOffsets says
# (3.13 on). Named <pyenv version>.txt; the first line says where that
# version lives. Not the free-threaded builds (3.13.0t), which the agent does
# not walk. None without pyenv: the test then checks nothing of it.
PY_LAYOUT_PYENV := $(filter-out 3.0.% 3.1.% 3.2.% 3.3.% 3.4.% 3.5.% 3.6.% %t,$(notdir \
    $(wildcard $(PYENV_ROOT)/versions/3.*)))
PY_LAYOUT_PYENV := $(foreach v,$(PY_LAYOUT_PYENV),$(if \
    $(wildcard $(PYENV_ROOT)/versions/$(v)/include/python$(call py_minor,$(v))*/Python.h),$(v)))
PY_LAYOUT_FIXTURES := $(patsubst %,$(B)/fixtures/py_layout/%.txt,$(PY_LAYOUT_PYENV))
FIXTURES += $(PY_LAYOUT_FIXTURES)
$(B)/tests/test_py_layout $(B)/tests/test_py_layout_hostile: $(PY_LAYOUT_FIXTURES) \
    tests/unit/py_layout_helpers.h
$(B)/fixtures/py_layout/%.txt: tools/python_layout.sh tools/python_layout/layout.c
	@mkdir -p $(dir $@)
	{ echo "# prefix $(PYENV_ROOT)/versions/$*"; tools/python_layout.sh --one \
	    $(dir $(firstword $(wildcard $(PYENV_ROOT)/versions/$*/include/python$(call py_minor,$*)*/Python.h))); \
	} > $@.tmp && mv $@.tmp $@

# Go, with Debian's golang-go. GOCACHE under build/, so it builds as root in
# CI without a home directory; no cgo, so Go's own linker lays out the file.
GO ?= go
GOENV := GOCACHE=$(abspath $(B))/gocache GOFLAGS= CGO_ENABLED=0 $(if $(CROSS),GOARCH=$(ARCH))
# The Go fixture with its symbols (where the tests find addresses) and
# stripped as production builds are (-s -w: no .symtab, no DWARF), named
# from .gopclntab alone. The same code at the same addresses.
$(B)/fixtures/go_full: tests/unit/fixtures/gofix.go
	@mkdir -p $(dir $@)
	cd $(dir $<) && $(GOENV) $(GO) build -o $(abspath $@) $(notdir $<)
$(B)/fixtures/go_stripped: tests/unit/fixtures/gofix.go
	@mkdir -p $(dir $@)
	cd $(dir $<) && $(GOENV) $(GO) build -ldflags='-s -w' -o $(abspath $@) $(notdir $<)
# The same for arm64 (GOARCH=arm64: Go cross-compiles by itself), with its
# symbols: go_table's arm64 rows (the return address in x30, then at 0(RSP)).
$(B)/fixtures/go_a64: tests/unit/fixtures/gofix.go
	@mkdir -p $(dir $@)
	cd $(dir $<) && $(GOENV) GOARCH=arm64 $(GO) build -o $(abspath $@) $(notdir $<)

# Workloads for the integration tests, built with frame pointers in every
# function. clang, because gcc 12 leaves them out of leaf functions that use
# no stack even with -fno-omit-frame-pointer, and a frame-pointer walk then
# skips the leaf's caller (the CFI unwinder is what fixes that for any code).
# (Cross-built with clang's --target: FP_CFLAGS go to clang only.)
FP_CFLAGS := -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline -pthread \
             $(if $(CROSS),--target=$(CROSS:-=))
WORKLOADS := $(B)/workloads/cpu_split $(B)/workloads/syscall_heavy $(B)/workloads/go_split \
             $(B)/workloads/go_leaf $(B)/workloads/go_cgo $(B)/workloads/tick_mix \
             $(B)/workloads/jit_perfmap $(B)/workloads/offcpu_mix
# The CFI tests' workloads: built as distributions build, without frame
# pointers (gcc -O2 -fomit-frame-pointer, g++, rustc -O), except qsort_cb,
# which has them so that only libc's frames need CFI. No sibling calls, so
# each function's caller is on the stack to be found.
NOFP_CFLAGS := -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls
CFI_WORKLOADS := $(B)/workloads/cfi_split $(B)/workloads/qsort_cb $(B)/workloads/cfi_signal \
                 $(B)/workloads/vdso_loop \
                 $(B)/workloads/cxx_split $(B)/workloads/rust_split
WORKLOADS += $(CFI_WORKLOADS)
# The debuginfod tests' workloads: built with -g, their debug files split out
# into workloads/debug/ (objcopy --only-keep-debug) and the binaries stripped
# (--strip-all), as distributions ship them.
DEBUGINFOD_WORKLOADS := $(B)/workloads/stripped_split $(B)/workloads/stripped_cxx
WORKLOADS += $(DEBUGINFOD_WORKLOADS)
$(B)/workloads/stripped_split: $(B)/workloads/cfi_split
	@mkdir -p $(B)/workloads/debug
	objcopy --only-keep-debug $< $(B)/workloads/debug/$(notdir $@).debug
	strip --strip-all -o $@ $<
$(B)/workloads/stripped_cxx: $(B)/workloads/cxx_split
	@mkdir -p $(B)/workloads/debug
	objcopy --only-keep-debug $< $(B)/workloads/debug/$(notdir $@).debug
	strip --strip-all -o $@ $<
$(B)/workloads/cfi_split: tests/workloads/cpu_split.c
	@mkdir -p $(dir $@)
	$(CC) $(NOFP_CFLAGS) -fno-inline -pthread -o $@ $<
# cfi_split's build with PAC-signed return addresses, as arm64 distributions
# build (-mbranch-protection=standard: paciasp/autiasp around each saved
# x30): an arm64 workload (make test-arm64).
$(B)/workloads/pac_split: tests/workloads/cpu_split.c
	@mkdir -p $(dir $@)
	$(CC) $(NOFP_CFLAGS) -fno-inline -pthread -mbranch-protection=standard -o $@ $<
$(B)/workloads/qsort_cb: tests/workloads/qsort_cb.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FP_CFLAGS) -o $@ $<
$(B)/workloads/cfi_signal: tests/workloads/cfi_signal.c
	@mkdir -p $(dir $@)
	$(CC) $(NOFP_CFLAGS) -o $@ $<
$(B)/workloads/vdso_loop: tests/workloads/vdso_loop.c
	@mkdir -p $(dir $@)
	$(CC) $(NOFP_CFLAGS) -o $@ $<
$(B)/workloads/cxx_split: tests/workloads/cxx_split.cc
	@mkdir -p $(dir $@)
	g++ $(NOFP_CFLAGS) -o $@ $<
$(B)/workloads/rust_split: tests/workloads/rust_split.rs
	@mkdir -p $(dir $@)
	$(RUSTC) -O -g -o $@ $<
$(B)/workloads/%: tests/workloads/%.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FP_CFLAGS) -o $@ $<
# Go keeps frame pointers on amd64 and arm64 by itself; stripped, so names
# come from .gopclntab.
$(B)/workloads/go_split: tests/workloads/go_split/main.go
	@mkdir -p $(dir $@)
	cd $(dir $<) && $(GOENV) $(GO) build -ldflags='-s -w' -o $(abspath $@) $(notdir $<)
# Hot leaf functions (no frame, no frame pointer): walked by .gopclntab.
$(B)/workloads/go_leaf: tests/workloads/go_leaf/main.go
	@mkdir -p $(dir $@)
	cd $(dir $<) && $(GOENV) $(GO) build -ldflags='-s -w' -o $(abspath $@) $(notdir $<)
# cgo: Go calls C, C calls back into Go (gcc builds the C part).
$(B)/workloads/go_cgo: tests/workloads/go_cgo/main.go
	@mkdir -p $(dir $@)
	cd $(dir $<) && $(GOENV) CGO_ENABLED=1 $(GO) build -ldflags='-s -w' -o $(abspath $@) \
	    $(notdir $<)

# The web UI's pure functions (server/ui/*.test.js: tree, layout, search,
# diff, colours, formats, URL) with node's own test runner.
UNIT_JS := tests/browser/ui_unit.mjs

ifeq ($(CROSS),)
unit: deps $(UNIT_BINS) $(FIXTURES)
	@tests/run_unit.sh $(UNIT_BINS) $(UNIT_JS)
else
# make ARCH=arm64 unit on an x86_64 host: the cross-built tests under
# qemu-user (RUN_TARGET), but not those that read fixtures (built by the
# host's tools for the host, some looked for under build/), nor those that
# start threads: qemu-aarch64-static 7.2 spins for ever in pthread_create on
# this machine's 6.18 kernel (a two-line program does too). test_debugplain
# has the host's objcopy read /proc/PID/exe, under qemu-user qemu's binary.
UNIT_CROSS_SKIP := test_symbolizer test_symtab test_dwarf_scopes test_gopclntab test_cfi_table \
                   test_cfi_table_xcheck test_go_table test_plt test_debugfile test_py_layout \
                   test_py_lines test_http test_jvm test_py_code test_store test_store_levels \
                   test_debugplain
UNIT_CROSS_BINS := $(addprefix $(B)/tests/,$(filter-out $(UNIT_CROSS_SKIP),$(UNIT_TESTS)))
unit: deps $(UNIT_CROSS_BINS)
	@UNIT_RUNNER="timeout 600 $(RUN_TARGET)" tests/run_unit.sh $(UNIT_CROSS_BINS)
endif

# The browser tests' driver: playwright-core from the npm registry, pinned by
# tests/browser/package-lock.json; Chromium is Debian's (tools/deps.sh).
BROWSER_DEPS := tests/browser/node_modules/.package-lock.json
$(BROWSER_DEPS): tests/browser/package.json tests/browser/package-lock.json
	cd tests/browser && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The Pyroscope tests' clients, from the npm registry, pinned by
# tests/pyroscope/package-lock.json: @pyroscope/nodejs (its @datadog/pprof
# ships prebuilt native modules), and Connect's client (@connectrpc/*) with
# buf and protoc-gen-es, which generate its code from server/proto.
PYRO_DEPS := tests/pyroscope/node_modules/.package-lock.json
$(PYRO_DEPS): tests/pyroscope/package.json tests/pyroscope/package-lock.json
	cd tests/pyroscope && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

integration: deps $(B)/codexray-node-agent $(B)/codexray-server $(WORKLOADS) $(BROWSER_DEPS) $(PYRO_DEPS)
	@python3 tests/integration/run.py

# The runtimes tested from mmdebstrap roots (tests/integration/run.py's
# RUNTIME_TESTS); .ci/run runs them after `make test`.
test-runtimes: deps $(B)/codexray-node-agent $(B)/codexray-server $(WORKLOADS)
	@python3 tests/integration/run.py --runtimes

# deploy/ checked without systemd, Docker or Kubernetes (tests/deploy/check_deploy.py).
# Debian's python3, which has yaml.
deploy-check: deps $(B)/codexray-node-agent $(B)/codexray-server
	@/usr/bin/python3 tests/deploy/check_deploy.py

# README.md and docs/: every relative link resolves, every path named exists,
# every source file has its page in docs/internals/ (tools/docs_check.py).
docs-check:
	@python3 tools/docs_check.py

test: format-check unit sanitize integration deploy-check fuzz-check docs-check

# --- ASan and UBSan: the server's and common/'s unit tests, and the fuzz
# target of the ingest path (libFuzzer, Debian's clang). Objects of their own
# under build/san/.
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
             -fno-omit-frame-pointer
# clang's -Wstring-concatenation takes SQL split over lines for a missing comma.
SAN_CFLAGS := -std=gnu11 $(WARN) -Wno-string-concatenation -D_GNU_SOURCE -pthread \
              -fno-strict-aliasing -I$(B) -I$(B)/gen
SAN_SRC := $(COMMON_SRC) server/ingest.c server/ingest_work.c server/stack_key.c server/store_common.c \
           server/ch_sql.c server/store_clickhouse.c server/store_clickhouse_rw.c \
           server/store_clickhouse_batch.c server/store_clickhouse_group.c \
           server/store_clickhouse_warm.c server/store_clickhouse_names.c \
           server/store_clickhouse_frames.c server/store_clickhouse_upgrade.c \
           server/store_clickhouse_shards.c server/ch_shard.c \
           server/store_clickhouse_rollup.c server/store_clickhouse_schema.c server/store_sqlite.c \
           server/store_sqlite_put.c server/store_sqlite_read.c server/store_sqlite_maint.c \
           server/store_sqlite_fn.c server/text.c server/budget.c server/pprof_ids.c server/query.c server/query_flame.c server/query_focus.c server/query_search.c server/debuginfod.c \
           server/pyroscope.c
SAN_OBJ := $(patsubst %.c,$(B)/san/obj/%.o,$(SAN_SRC)) $(B)/san/obj/gen/profile.pb-c.o
SAN_LIBS := -lcurl -lsqlite3 -ldebuginfod -lelf -lz -ldeflate -lzstd -lprotobuf-c -lpthread -lm
$(B)/san/obj/%.o: %.c $(B)/gen/profile.pb-c.h
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) -fsanitize=fuzzer-no-link $(SAN_CFLAGS) -c $< -o $@
$(B)/san/obj/gen/profile.pb-c.o: $(B)/gen/profile.pb-c.c
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) -std=gnu11 -I$(B)/gen -c $< -o $@

SAN_TESTS := test_json test_query test_query_search test_pprof_reader test_pprof_writer test_stack_key test_buf_gz test_hmap test_arena \
             test_varint test_ingest test_store test_store_levels test_http test_http_pyroscope test_http_connect test_ch_sql \
             test_store_common test_batch test_ch_shard \
             test_list test_fn_timeline
SAN_BINS := $(addprefix $(B)/san/tests/,$(SAN_TESTS))
$(B)/san/tests/%: tests/unit/%.c $(SAN_OBJ)
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) $(SAN_CFLAGS) -Wno-unused-command-line-argument -Itests/unit -o $@ $< \
	    $(SAN_OBJ) $(SAN_LIBS) -lcmocka

# The HTTP layer's: http.c sanitized too, and the UI's table as it is (data).
SAN_HTTP_OBJ := $(patsubst %.c,$(B)/san/obj/%.o,$(filter-out server/pyroscope.c,$(HTTP_SRC)))
SAN_QUERIER_PB_OBJ := $(B)/san/obj/gen/querier/v1/querier.pb-c.o $(B)/san/obj/gen/types/v1/types.pb-c.o
$(SAN_QUERIER_PB_OBJ): $(B)/san/obj/gen/%.pb-c.o: $(B)/gen/%.pb-c.c $(B)/gen/querier/v1/querier.pb-c.h
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) -std=gnu11 -I$(B)/gen -c $< -o $@
$(B)/san/obj/server/http_connect.o $(B)/san/obj/server/connect_req.o: $(B)/gen/querier/v1/querier.pb-c.h
$(B)/san/tests/test_http $(B)/san/tests/test_http_pyroscope $(B)/san/tests/test_http_connect: \
    $(B)/san/tests/%: tests/unit/%.c $(SAN_OBJ) $(SAN_HTTP_OBJ) $(SAN_QUERIER_PB_OBJ) $(UI_OBJ)
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) $(SAN_CFLAGS) -Wno-unused-command-line-argument -Itests/unit -o $@ $< \
	    $(SAN_OBJ) $(SAN_HTTP_OBJ) $(SAN_QUERIER_PB_OBJ) $(UI_OBJ) $(SAN_LIBS) -lmicrohttpd -lcmocka

$(B)/san/tests/test_fn_timeline: tests/unit/test_fn_timeline.c $(SAN_OBJ) $(B)/san/obj/server/fn_timeline.o
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) $(SAN_CFLAGS) -Wno-unused-command-line-argument -Itests/unit -o $@ $< \
	    $(SAN_OBJ) $(B)/san/obj/server/fn_timeline.o $(SAN_LIBS) -lcmocka

sanitize: $(SAN_BINS)
	@tests/run_unit.sh $(SAN_BINS)

$(B)/fuzz/fuzz_ingest: tests/fuzz/fuzz_ingest.c $(SAN_OBJ)
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) -fsanitize=fuzzer $(SAN_CFLAGS) -o $@ $< $(SAN_OBJ) $(SAN_LIBS)

# The reader of every list-valued option (common/list.c): nothing else linked.
$(B)/fuzz/fuzz_list: tests/fuzz/fuzz_list.c $(B)/san/obj/common/list.o
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) -fsanitize=fuzzer $(SAN_CFLAGS) -o $@ $< $(B)/san/obj/common/list.o

# The readers of POST /ingest (server/pyroscope.c): names, times,
# multipart bodies, folded lines.
$(B)/fuzz/fuzz_pyroscope: tests/fuzz/fuzz_pyroscope.c $(SAN_OBJ)
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) -fsanitize=fuzzer $(SAN_CFLAGS) -o $@ $< $(SAN_OBJ) $(SAN_LIBS)

# The readers of the querier API (server/connect_req.c): requests in JSON
# and binary, label selectors.
$(B)/fuzz/fuzz_connect: tests/fuzz/fuzz_connect.c $(SAN_OBJ) $(B)/san/obj/server/connect_req.o \
    $(SAN_QUERIER_PB_OBJ)
	@mkdir -p $(dir $@)
	$(CLANG) $(SAN_FLAGS) -fsanitize=fuzzer $(SAN_CFLAGS) -o $@ $< $(SAN_OBJ) \
	    $(B)/san/obj/server/connect_req.o $(SAN_QUERIER_PB_OBJ) $(SAN_LIBS)

# make fuzz FUZZ_TIME=600: the targets for that long in all, from their seed
# corpora: the ingest path (tests/fuzz/corpus, written by
# tests/fuzz/make_corpus.py) three sixths of it, the list reader
# (tests/fuzz/corpus_list), the Pyroscope readers
# (tests/fuzz/corpus_pyroscope) and the querier API's
# (tests/fuzz/corpus_connect) a sixth each. What they find grows
# build/fuzz/corpus*; a crash is saved as build/fuzz/crash-*.
FUZZ_TIME ?= 300
FUZZ_LIST_TIME = $(shell expr $(FUZZ_TIME) / 6 + 1)
FUZZ_INGEST_TIME = $(shell expr $(FUZZ_TIME) - 3 \* $(FUZZ_TIME) / 6)
fuzz: $(B)/fuzz/fuzz_ingest $(B)/fuzz/fuzz_list $(B)/fuzz/fuzz_pyroscope $(B)/fuzz/fuzz_connect
	@mkdir -p $(B)/fuzz/corpus $(B)/fuzz/corpus_list $(B)/fuzz/corpus_pyroscope \
	    $(B)/fuzz/corpus_connect
	cd $(B)/fuzz && ./fuzz_ingest -max_total_time=$(FUZZ_INGEST_TIME) -rss_limit_mb=2048 -timeout=30 \
	    -print_final_stats=1 corpus $(abspath tests/fuzz/corpus)
	cd $(B)/fuzz && ./fuzz_list -max_total_time=$(FUZZ_LIST_TIME) -rss_limit_mb=2048 -timeout=10 \
	    -max_len=8192 -print_final_stats=1 corpus_list $(abspath tests/fuzz/corpus_list)
	cd $(B)/fuzz && ./fuzz_pyroscope -max_total_time=$(FUZZ_LIST_TIME) -rss_limit_mb=2048 -timeout=10 \
	    -max_len=16384 -print_final_stats=1 corpus_pyroscope $(abspath tests/fuzz/corpus_pyroscope)
	cd $(B)/fuzz && ./fuzz_connect -max_total_time=$(FUZZ_LIST_TIME) -rss_limit_mb=2048 -timeout=10 \
	    -max_len=16384 -print_final_stats=1 corpus_connect $(abspath tests/fuzz/corpus_connect)

# make test's share: a minute, all targets.
fuzz-check:
	@$(MAKE) --no-print-directory fuzz FUZZ_TIME=60

# The README's installs run for real (tests/install/run.py): Docker and Podman
# images built and run, systemd-nspawn machines with the packages of
# `make deb` (made from build/ by the test) and with install.sh, the
# Kubernetes manifest typed and its agent container run. Root; not part of
# `make test` (about 7 minutes). Debian's python3: yaml and kubernetes.
test-install: deps $(B)/codexray-node-agent $(B)/codexray-server $(B)/workloads/cpu_split
	@/usr/bin/python3 tests/install/run.py

# --- benchmark: a report, not a pass/fail test ---
$(B)/bench/many: bench/many.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FP_CFLAGS) -o $@ $<

# What a page touched after a sleep costs on this machine (bench/run.py).
$(B)/bench/pagetouch: bench/pagetouch.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

# The process table's first read of a new process (cc1): `procs_read [N]`.
$(B)/bench/procs_read: bench/procs_read.c $(UNIT_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(UNIT_LIB_OBJS) $(LDLIBS)

$(B)/bench/pingpong: bench/pingpong.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -pthread
# An empty sched_switch program and its loader: the hook's own cost.
$(B)/bench/switch_floor.bpf.o: bench/switch_floor.bpf.c $(B)/vmlinux.h | deps
	@mkdir -p $(dir $@)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(B) -Wall -Werror -c $< -o $@
$(B)/bench/switch_floor: bench/switch_floor.c $(B)/bench/switch_floor.bpf.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lbpf
$(B)/bench/deep: bench/deep.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FP_CFLAGS) -o $@ $<
# The same built as distributions build (no frame pointers): bench/bpf_ab.py's
# cfi workload, walked by CFI rows alone.
$(B)/bench/deep_nofp: bench/deep.c
	@mkdir -p $(dir $@)
	$(CLANG) -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls -pthread -o $@ $<
$(B)/bench/gen_profiles: bench/gen_profiles.c $(call obj,$(COMMON_SRC)) $(PB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ -ldebuginfod -lelf -lz -ldeflate -lzstd -lprotobuf-c -lpthread

# The server's ingest in-process, without HTTP: `ingest_bench DIR [REPS]`.
$(B)/bench/ingest_bench: bench/ingest_bench.c \
    $(call obj,$(COMMON_SRC) server/ingest.c server/ingest_work.c server/stack_key.c server/store_common.c server/store_sqlite.c \
      server/store_sqlite_put.c server/store_sqlite_read.c server/store_sqlite_maint.c server/text.c \
      server/store_sqlite_fn.c server/budget.c server/pprof_ids.c) \
    $(PB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(SERVER_LDLIBS)

# CFI unwind tables: what a binary's table costs, `cfi_build FILE...`.
$(B)/bench/cfi_build: bench/cfi_build.c $(call obj,agent/unwind/cfi_table.c agent/unwind/cfi_fde.c \
    agent/unwind/cfi_rows.c agent/unwind/cfi_exec.c agent/unwind/cfi_section.c agent/unwind/cfi_stats.c agent/unwind/cfi_arm64.c \
    common/arena.c common/hmap.c)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ -ldw -lelf

bench: deps $(B)/codexray-node-agent $(B)/codexray-server $(WORKLOADS) $(B)/bench/many \
       $(B)/bench/gen_profiles $(B)/bench/ingest_bench $(B)/bench/deep $(B)/bench/cfi_build \
       $(B)/bench/pingpong $(B)/bench/pagetouch $(B)/bench/switch_floor $(BROWSER_DEPS)
	@python3 bench/run.py
	@python3 bench/startup_bench.py
	@python3 bench/offcpu_bench.py
	@python3 bench/cfi_bench.py
	@python3 bench/py_bench.py
	@python3 bench/java_bench.py
	@python3 bench/compile_bench.py
	@python3 bench/server_bench.py
	@python3 bench/store_bench.py
	@node bench/ui_bench.mjs

# The simulated fleet over the two-shard ClickHouse (bench/fleet_sim.py):
# FLEET_S seconds of load (the issue's run is 600), then the same fleet
# into one SQLite server for the ratio, both with batches sent again
# after their answer (each store counts a profile once: ClickHouse by its
# tables' keys, SQLite by its identity index; docs/internals/store.md).
# Not part of `make bench`.
FLEET_S ?= 150
# Six uploads decoded at once, so that a ClickHouse server's writer has
# requests to gather (docs/clickhouse.md); SQLite given the same.
FLEET_SERVER_ARGS ?= --ingest-concurrency 6
bench-fleet: $(B)/codexray-server $(B)/bench/gen_profiles
	@python3 bench/fleet_sim.py --duration $(FLEET_S) --server-args "$(FLEET_SERVER_ARGS)"
	@python3 bench/fleet_sim.py --duration $(FLEET_S) --store sqlite \
	    --server-args "$(FLEET_SERVER_ARGS)"

# Only the web UI's part of the benchmark (about 30 s).
bench-ui: $(B)/codexray-server $(BROWSER_DEPS)
	@node bench/ui_bench.mjs

# --- the agent on other kernels: Debian's 5.10, 6.1, 6.12 and unstable's
# newest, each booted under qemu (tools/kernels/run.py); one with KERNELS=6.1.
# Not part of `make test`.
KERNELS ?= 5.10 6.1 6.12 sid
test-kernels: deps $(B)/codexray-node-agent $(B)/workloads/cpu_split $(B)/workloads/cfi_split \
              $(B)/workloads/syscall_heavy \
              $(B)/kernels/bpf_each
	@KERNELS="$(KERNELS)" python3 tools/kernels/run.py

# Each BPF program of an object loaded alone: every program's verifier log.
$(B)/kernels/bpf_each: tools/kernels/bpf_each.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lbpf

# --- the arm64 agent on Debian's arm64 6.1 and 6.12, under qemu-system-aarch64
# (tools/kernels/run.py --arch arm64); one with ARM64_KERNELS=6.1. The agent,
# bpf_each and the workloads (cpu_split, cfi_split, pac_split, go_split,
# jit_perfmap, syscall_heavy) by the rules above, in a make of their own with
# ARCH=arm64: cross-built into build-arm64/ on x86_64, in build/ on an arm64
# host; and the arm64 packages (make ARCH=arm64 deb: build/deb/), the agent's
# of which the guest installs with dpkg -i and runs from /usr/bin.
ARM64_KERNELS ?= 6.1 6.12
ARM64_B := $(if $(filter arm64,$(HOST_ARCH)),build,build-arm64)
ARM64_BINS := $(addprefix $(ARM64_B)/,codexray-node-agent kernels/bpf_each \
              $(addprefix workloads/,cpu_split cfi_split pac_split go_split jit_perfmap \
                syscall_heavy))
test-arm64: deps
	@$(MAKE) --no-print-directory ARCH=arm64 $(ARM64_BINS) deb
	@KERNELS="$(ARM64_KERNELS)" python3 tools/kernels/run.py --arch arm64 --build $(ARM64_B)
