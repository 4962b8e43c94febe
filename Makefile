# prowl: whole-host eBPF sampling CPU profiler.
# `make` builds build/prowl; `make deps` installs Debian 12 build/test packages.

# Every core by default (the fresh-clone suite builds three trees); -jN or -j1 on the
# command line wins. Only the top make sets it: a sub-make shares its jobs.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif

# ARCH=arm64 on an x86_64 host cross-builds with Debian's gcc-aarch64-linux-gnu and arm64
# libraries (multiarch: packaging/install-deps.sh arm64), into build-arm64 by default.
HOST_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
ARCH     ?= $(HOST_ARCH)
ifneq ($(ARCH),$(HOST_ARCH))
O        ?= build-$(ARCH)
CROSS    := $(if $(filter arm64,$(ARCH)),aarch64-linux-gnu-,$(error ARCH=$(ARCH): only x86 and arm64 are supported))
ifeq ($(origin CC),default)
CC       := $(CROSS)gcc
endif
CXX      := $(CROSS)g++
STRIP    := $(CROSS)strip
endif
O        ?= build
SAN      ?= 0
CC       ?= cc
CLANG    ?= clang
BPFTOOL  ?= bpftool
PROTOC_C ?= protoc-c
VERSION  := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
GIT_REV  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

CFLAGS   ?= -O2 -g
CFLAGS   += -Wall -Wextra -Wno-missing-field-initializers -std=gnu11 -fno-omit-frame-pointer \
	    -D_GNU_SOURCE -DPROWL_VERSION='"$(VERSION)"' -DPROWL_GIT_REV='"$(GIT_REV)"'
# Source folders: each stage's folder and its sub-folders (see README.md, "How it works").
SRC_DIRS := lib lib/containers symbolizer symbolizer/names symbolizer/object symbolizer/unwind symbolizer/python symbolizer/java symbolizer/node \
            agent agent/cli agent/config agent/sample agent/resolve agent/labels \
            agent/aggregate agent/encode agent/export agent/metrics agent/analyse
INCLUDES := -I$(O) -I$(O)/proto -Ibpf $(addprefix -I,$(SRC_DIRS))
LDLIBS   := -lbpf -ldw -lelf -ldebuginfod -lprotobuf-c -lz -lcurl -lyaml -lmicrohttpd -lsystemd -ljson-c -lcrypto -liberty -lpthread -lm
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# FUZZ=1 (with O=build-fuzz): clang, ASan+UBSan and libFuzzer's coverage, for `make fuzzers`.
ifeq ($(FUZZ),1)
CC      := $(CLANG)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=fuzzer,address,undefined
endif

LIB_SRCS   := $(filter-out agent/cli/main.c,$(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
PROTOS     := $(wildcard proto/*.proto)
PROTO_OBJS := $(patsubst proto/%.proto,$(O)/obj/proto/%.pb-c.o,$(PROTOS))
PROTO_HDRS := $(patsubst proto/%.proto,$(O)/proto/%.pb-c.h,$(PROTOS))
LIB_OBJS   := $(patsubst %.c,$(O)/obj/%.o,$(LIB_SRCS)) $(PROTO_OBJS)
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(O)/tests/%,$(UNIT_SRCS))
WORKLOADS  := $(patsubst tests/workloads/%.c,$(O)/workloads/%,$(wildcard tests/workloads/*.c)) \
              $(patsubst tests/workloads/%.cpp,$(O)/workloads/%,$(wildcard tests/workloads/*.cpp))
CXX      ?= g++
# rustc comes with the machine image (rustup's, in ~/.cargo/bin), not from Debian.
RUSTC    ?= $(shell command -v rustc 2>/dev/null || ls $(HOME)/.cargo/bin/rustc 2>/dev/null)

.SECONDARY:
.PHONY: all clean deps test check-quick unit e2e bench bench-cost bench-kube bench-report san-test install workloads tools check-cfi check-cfi-arm64 check-long mutation kernel-matrix kernel-matrix-arm64 soak deb image image-index package-test fuzz fuzzers otelcol servers pyspy ebpf-profiler bench-peers
all: $(O)/prowl

# The kernel types the BPF program is compiled against: the build host's own, or for a
# cross build a Debian kernel's of the target (packaging/install-deps.sh arm64 puts it there).
ifeq ($(ARCH),$(HOST_ARCH))
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
VMLINUX_BTF_HELP := the build host's kernel must have BTF (CONFIG_DEBUG_INFO_BTF=y)
else
VMLINUX_BTF ?= /var/cache/prowl/btf/vmlinux-$(ARCH).btf
VMLINUX_BTF_HELP := run packaging/install-deps.sh $(ARCH), or name an $(ARCH) kernel's BTF with VMLINUX_BTF=
endif
$(O)/vmlinux.h:
	@mkdir -p $(@D)
	@test -r $(VMLINUX_BTF) || { echo "error: $(VMLINUX_BTF) missing: $(VMLINUX_BTF_HELP)"; exit 1; }
	$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

$(O)/prowl.bpf.o: bpf/prowl.bpf.c bpf/unwind.bpf.h bpf/offcpu.bpf.h bpf/python.bpf.h bpf/java.bpf.h bpf/v8.bpf.h bpf/prowl.h $(O)/vmlinux.h
	$(CLANG) -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) -I$(O) -Ibpf -c $< -o $@

$(O)/prowl.skel.h: $(O)/prowl.bpf.o
	$(BPFTOOL) gen skeleton $< name prowl_bpf > $@.tmp && mv $@.tmp $@

# All of proto/ is compiled in one protoc-c call, since the files import each other.
$(O)/proto/.stamp: $(PROTOS)
	@mkdir -p $(O)/proto
	$(PROTOC_C) --proto_path=proto --c_out=$(O)/proto $(PROTOS)
	@touch $@

$(O)/proto/%.pb-c.c $(O)/proto/%.pb-c.h: $(O)/proto/.stamp
	@:

$(O)/obj/proto/%.pb-c.o: $(O)/proto/%.pb-c.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter $(INCLUDES) -c $< -o $@

# Objects depend on the Makefile too: a change of flags or of the folder layout
# (headers moved, so the .d files name paths that are gone) rebuilds them all.
$(O)/obj/%.o: %.c $(PROTO_HDRS) Makefile
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(INCLUDES) -MMD -MP -c $< -o $@

# Only the sample stage includes the BPF skeleton.
$(O)/obj/agent/sample/sample.o $(O)/obj/agent/sample/sample_stats.o $(O)/obj/agent/sample/maps_io.o $(O)/obj/agent/sample/offcpu.o $(O)/obj/agent/sample/pin.o $(O)/obj/agent/sample/cpus.o: $(O)/prowl.skel.h
# The flame graph page is assembled into html.o (.incbin).
$(O)/obj/agent/analyse/html.o: agent/analyse/flame.html

$(O)/prowl: $(O)/obj/agent/cli/main.o $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# A unit test may name extra link flags in a "/* LINK: ... */" line (e.g. --wrap).
$(O)/tests/%: tests/unit/%.c $(LIB_OBJS) $(PROTO_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(INCLUDES) -o $@ $< $(LIB_OBJS) $(LDFLAGS) $(LDLIBS) -lcmocka \
		$$(sed -n 's|^/\* *LINK: *\(.*\) *\*/|\1|p' $<)

# Benchmark programs that link the agent's stages (tests/bench/*.c).
$(O)/bench/%: tests/bench/%.c $(LIB_OBJS) $(PROTO_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(INCLUDES) -o $@ $< $(LIB_OBJS) $(LDFLAGS) $(LDLIBS)

# The off-CPU hooks doing nothing (tests/bench/offcpu.sh's floor).
$(O)/bench/offcpu_floor.bpf.o: tests/bench/offcpu_floor.bpf.c $(O)/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) -I$(O) -c $< -o $@

# libFuzzer harnesses (tests/fuzz/fuzz_*.c), one per parser of untrusted input; build
# them with FUZZ=1 (make fuzz does).
FUZZERS := $(patsubst tests/fuzz/%.c,$(O)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
$(O)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(LIB_OBJS) $(PROTO_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(INCLUDES) -o $@ $< $(LIB_OBJS) $(LDFLAGS) $(LDLIBS)

fuzzers: $(FUZZERS)

# Every harness for FUZZ_SECONDS (two at a time), in build-fuzz; prints executions and
# crashes per harness into build-fuzz/fuzz/results.txt. The suite runs 15 s each.
FUZZ_SECONDS ?= 600
fuzz:
	$(MAKE) O=build-fuzz FUZZ=1 fuzzers
	tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_ARGS)

# Test workloads: each file says in its header how it must be built.
$(O)/workloads/%: tests/workloads/%.c
	@mkdir -p $(@D)
	$(CC) $$(sed -n 's|^/\* *BUILD: *\(.*\) *\*/|\1|p' $<) -o $@ $< $$(sed -n 's|^/\* *LIBS: *\(.*\) *\*/|\1|p' $<)

$(O)/workloads/%: tests/workloads/%.cpp
	@mkdir -p $(@D)
	$(CXX) $$(sed -n 's|^/\* *BUILD: *\(.*\) *\*/|\1|p' $<) -o $@ $<

# The Rust workload, with legacy and v0 symbol mangling; skipped (the tests say so)
# where there is no rustc. MAKEFLAGS is cleared: rustc would look for a jobserver it is not given.
RUST_WORKLOADS := $(if $(RUSTC),$(O)/workloads/rs_hot $(O)/workloads/rs_hot_v0)
$(O)/workloads/rs_hot: tests/workloads/rs_hot.rs
	@mkdir -p $(@D)
	MAKEFLAGS= $(RUSTC) -O -g -o $@ $<
$(O)/workloads/rs_hot_v0: tests/workloads/rs_hot.rs
	@mkdir -p $(@D)
	MAKEFLAGS= $(RUSTC) -O -g -C symbol-mangling-version=v0 -o $@ $<

# The Go workload, with its symbols and DWARF and without (-s -w: .gopclntab only);
# skipped (the tests say so) where there is no go. Offline: GOPATH mode, no modules.
GO := $(shell command -v go 2>/dev/null)
GO_WORKLOADS := $(if $(GO),$(O)/workloads/gosplit $(O)/workloads/gosplit_stripped)
$(O)/workloads/gosplit: tests/workloads/gosplit.go
	@mkdir -p $(@D) $(O)/gocache
	GO111MODULE=off GOCACHE=$(abspath $(O))/gocache $(GO) build -o $@ $<
$(O)/workloads/gosplit_stripped: tests/workloads/gosplit.go
	@mkdir -p $(@D) $(O)/gocache
	GO111MODULE=off GOCACHE=$(abspath $(O))/gocache $(GO) build -ldflags="-s -w" -o $@ $<

# CPython through the shared libpython (the PLT case of issue 8); skipped (the test says
# so) where libpython3.11-dev is not installed.
PY_WORKLOADS := $(if $(wildcard /usr/include/python3.11/Python.h),$(O)/workloads/pyembed $(O)/workloads/pyshared)
$(O)/workloads/pyembed $(O)/workloads/pyshared: $(O)/workloads/%: tests/workloads/python/%.c
	@mkdir -p $(@D)
	$(CC) -O2 -g -I/usr/include/python3.11 -o $@ $< -lpython3.11

# The forged CPython: its symbols must be in .dynsym, as a real interpreter's are.
$(O)/workloads/fakepy: tests/workloads/python/fakepy.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -rdynamic -o $@ $<

# The forged JVM: its serviceability symbols must be in .dynsym, as libjvm's are.
$(O)/workloads/fakejvm: tests/workloads/java/fakejvm.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -rdynamic -o $@ $<

# The forged node (its v8dbg_ constants the fixture's, in .dynsym as node's are), and the
# same with one constant out of its range.
$(O)/workloads/node/fakenode: tests/workloads/node/fakenode.c tests/unit/data/v8dbg_fixture.c
	@mkdir -p $(@D)
	$(CC) $$(sed -n 's|^/\* *BUILD: *\(.*\) *\*/|\1|p' $<) -o $@ $<
$(O)/workloads/node/fakenode_badmeta: tests/workloads/node/fakenode.c tests/unit/data/v8dbg_fixture.c
	@mkdir -p $(@D)
	$(CC) $$(sed -n 's|^/\* *BUILD: *\(.*\) *\*/|\1|p' $<) -DFP_FUNCTION=13 -o $@ $<
$(O)/workloads/node/fakenode_stripped: tests/workloads/node/fakenode.c tests/unit/data/v8dbg_fixture.c
	@mkdir -p $(@D)
	$(CC) $$(sed -n 's|^/\* *BUILD: *\(.*\) *\*/|\1|p' $<) -DNO_BUILTINS -o $@ $<

# A workload that includes another is rebuilt with it.
$(O)/workloads/split532_fp: tests/workloads/split532.c

# The library of the truncation attack (trunc_attack.c): two source files, so that
# the second one's line table is read only when its code first runs.
$(O)/workloads/libtrunc.so: tests/workloads/trunc_lib/first.c tests/workloads/trunc_lib/second.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -shared -fPIC -o $@ $^

# The Java workloads, compiled for JDK 11 (newer JVMs run them too) when a javac is here.
JAVAC ?= $(firstword $(wildcard /usr/lib/jvm/java-17-openjdk-amd64/bin/javac) $(shell command -v javac 2>/dev/null))
JAVA_WORKLOADS := $(if $(JAVAC),$(patsubst tests/workloads/java/%.java,$(O)/workloads/java/%.class,$(wildcard tests/workloads/java/*.java)))
$(O)/workloads/java/%.class: tests/workloads/java/%.java
	@mkdir -p $(@D)
	$(JAVAC) --release 11 -g -d $(@D) $<

# A cross build makes the C and C++ workloads only (the kernel matrix's): rustc, go and
# libpython3.11-dev here build for this machine, and the forged JVM and node are x86_64 code.
FAKEJVM  := $(O)/workloads/fakejvm
FAKENODE := $(addprefix $(O)/workloads/node/,fakenode fakenode_badmeta fakenode_stripped)
ifneq ($(ARCH),$(HOST_ARCH))
RUST_WORKLOADS :=
GO_WORKLOADS   :=
PY_WORKLOADS   :=
FAKEJVM        :=
FAKENODE       :=
endif

workloads: $(WORKLOADS) $(JAVA_WORKLOADS) $(O)/workloads/libtrunc.so $(RUST_WORKLOADS) $(GO_WORKLOADS) $(PY_WORKLOADS) $(O)/workloads/fakepy $(FAKEJVM) \
	$(FAKENODE)

# Google's pprof, built offline from Debian's golang-github-google-pprof-dev: the
# independent reader the tests check prowl's pprof output with.
$(O)/tools/pprof:
	@mkdir -p $(@D) $(O)/gocache
	GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$(abspath $(O))/gocache go build -o $@ github.com/google/pprof

# The OpenTelemetry Collector at one pinned release (tests/tools/otelcol: main.go, go.mod,
# go.sum), the real OTLP backend of tests/e2e/test_collector.py. Test tooling, not prowl:
# built once per machine into the tool cache (tests/tools/golib.sh), its modules from the
# Go module proxy; when the proxy cannot be reached it leaves $@.skip with the reason and
# the tests skip saying it.
GOTOOL_LIB := tests/tools/golib.sh tests/tools/unzip_checked.py
OTELCOL_SRC := $(addprefix tests/tools/otelcol/,main.go go.mod go.sum build.sh) $(GOTOOL_LIB)
$(O)/tools/otelcol: $(OTELCOL_SRC)
	tests/tools/otelcol/build.sh $(abspath $@)

otelcol: $(O)/tools/otelcol

# The real Pyroscope and Parca servers (pinned releases of their Go modules, built as their
# own main modules) and the Kubernetes API server (tests/tools/kube-apiserver): the same
# tool cache, the same skip when the proxy cannot be reached.
$(O)/tools/pyroscope: tests/tools/pyroscope/build.sh $(GOTOOL_LIB)
	tests/tools/pyroscope/build.sh $(abspath $@)
$(O)/tools/parca: tests/tools/parca/build.sh $(GOTOOL_LIB)
	tests/tools/parca/build.sh $(abspath $@)
$(O)/tools/kube-apiserver: $(addprefix tests/tools/kube-apiserver/,main.go go.mod go.sum build.sh) $(GOTOOL_LIB)
	tests/tools/kube-apiserver/build.sh $(abspath $@)

servers: $(O)/tools/pyroscope $(O)/tools/parca $(O)/tools/kube-apiserver


# What prowl reads of a live JVM's serviceability tables, as an image file (tests/unit's
# captured JVM metadata and the fuzzer's seed were made with it).
$(O)/tools/jvm_capture: tests/tools/jvm/jvm_capture.c $(LIB_OBJS) $(PROTO_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(INCLUDES) -o $@ $< $(LIB_OBJS) $(LDFLAGS) $(LDLIBS)

# py-spy, the reference for Python stacks (tests/e2e/test_pyspy.py): the wheel pinned by
# version and hash in tests/tools/py-spy/requirements.txt, installed with pip --target.
$(O)/tools/py-spy/bin/py-spy: tests/tools/py-spy/requirements.txt tests/tools/py-spy/install.sh
	tests/tools/py-spy/install.sh $(abspath $(O))/tools/py-spy

pyspy: $(O)/tools/py-spy/bin/py-spy

# The OpenTelemetry eBPF profiler at one pinned version (tests/tools/ebpf-profiler/go.mod,
# go.sum; its BPF object comes inside the module), the peer of make bench-peers.
$(O)/tools/ebpf-profiler: $(addprefix tests/tools/ebpf-profiler/,go.mod go.sum build.sh) $(GOTOOL_LIB)
	nice -n 15 tests/tools/ebpf-profiler/build.sh $(abspath $@)

ebpf-profiler: $(O)/tools/ebpf-profiler


tools: $(O)/tools/pprof $(O)/tools/jvm_capture

unit: $(UNIT_BINS)

deps:
	packaging/install-deps.sh

# The whole suite: normal build (with the test tooling: pprof and the Collector), then
# the same tests under ASan+UBSan with 6 s of each fuzzer beside them, then the kernel
# matrices of x86_64 and arm64 (two guests at a time between them). tests/run.sh compiles
# the sanitizer, fuzzer and arm64 builds itself (SIDE_BUILDS=1), at idle priority beside
# the first end-to-end pass. The workloads are built without the sanitizers in any build
# (their own BUILD lines): the sanitizer build takes the normal build's.
test: all unit workloads tools otelcol servers pyspy
	SIDE_BUILDS=1 FUZZ_BUILD=build-fuzz ARM64_BUILD=$(O)-arm64 tests/run.sh $(O) build-san

# The inner loop (under 5 minutes): the unit tests and one e2e test per stage
# (QUICK_E2E in tests/run.sh), on the normal build only.
check-quick: all unit workloads tools
	tests/run.sh --quick $(O)

# Debian's kernels (newest 5.10, 6.1, 6.12) booted under QEMU with prowl in an
# initramfs, and this machine's kernel: record in both unwinding modes, record -p,
# the agent, and the one-line errors. The kernels are kept in /var/cache/prowl/kmatrix
# (PROWL_KMATRIX_CACHE), the initramfs and the results in $(O)/kmatrix.
# make test runs it too; KMATRIX_ARGS=--both also measures the second DWARF build.
kernel-matrix: all workloads tools
	tests/kmatrix/kmatrix.py --build $(O) $(KMATRIX_ARGS)

# The same on Debian's arm64 kernels (5.10, 6.1, 6.12) under qemu-system-aarch64 (TCG, at
# nice 19), with prowl cross-built into $(O)-arm64; pprof runs here. make test runs it
# too (tests/run.sh, with ARM64_BUILD naming the cross build), its guests and x86_64's
# sharing two slots. The guests run the prowl of the arm64 package (make deb ARCH=arm64).
kernel-matrix-arm64: tools
	$(MAKE) ARCH=arm64 O=$(O)-arm64 all workloads deb
	nice -n 19 tests/kmatrix/kmatrix.py --arch arm64 --build $(O)-arm64 --pprof $(O)/tools/pprof \
		--deb $(O)-arm64/deb/prowl_$(DEB_VERSION)_arm64.deb $(KMATRIX_ARGS)

# The agent for SOAK_SECONDS (default 1 hour) under 200 process starts a second, a
# Pyroscope stand-in down 60 s of every 5 minutes and a SIGHUP every 5 minutes; it
# reports crashes, RSS drift, lost samples and windows delivered exactly once.
# `make check-long` runs a 2-minute version (tests/e2e/test_soak.py).
SOAK_SECONDS ?= 3600
# The e2e tests of 30 s and more that the suite skips (the 2-minute soak, the
# 60 s whole-host capture, the 30 s backend outage, the alerts over a real Prometheus).
check-long: all unit workloads tools
	PROWL_TEST_BUILD=$(O) PROWL_TEST_LONG=1 /usr/bin/python3 -m pytest -q -rfEs -p no:cacheprovider -m long tests/e2e

soak: all workloads
	PROWL_TEST_BUILD=$(O) tests/soak/soak.py --seconds $(SOAK_SECONDS) $(SOAK_ARGS)

# Benchmarks (not timed tests): record overhead against perf, the unwinder's
# per-sample cost and table builds, the agent over 10-minute runs, recording rules,
# report and diff over 1,000 agent files next to pprof, the flame graph in Chromium,
# then relabeling and Kubernetes metadata.
bench: all unit workloads tools $(O)/bench/rules_bench $(O)/bench/relabel_bench $(O)/bench/symbolize_bench \
	$(O)/bench/offcpu_floor $(O)/bench/offcpu_floor.bpf.o
	tests/bench/run.sh
	tests/bench/symbolize.sh
	tests/bench/unwind.sh
	tests/bench/python.sh
	tests/bench/java.sh
	tests/bench/node.sh
	tests/bench/agent.sh
	tests/bench/rules.sh
	tests/bench/offcpu.sh
	tests/bench/perfmap.sh
	tests/bench/report.sh
	tests/bench/kube.sh
	tests/bench/cost.sh $(COST_OLD)

# The agent's steady and cold cost (issue 32's targets) beside an older prowl:
# make bench-cost COST_OLD=/path/to/old/prowl (without it: the new agent alone).
bench-cost: all workloads
	tests/bench/cost.sh $(COST_OLD)

bench-report: all workloads tools
	tests/bench/report.sh

# prowl beside the OpenTelemetry eBPF profiler and perf on the same workloads (BENCHMARKS.md).
bench-peers: all workloads tools otelcol ebpf-profiler
	tests/bench/peers.sh

bench-kube: all workloads $(O)/bench/relabel_bench
	tests/bench/kube.sh

# prowl's unwind tables against libdw's CFI reader, for every ELF object under /usr/lib
# and /usr/bin (at most CHECK_CFI_SECONDS); the suite runs a sample of a few seconds.
CHECK_CFI_SECONDS ?= 1800
check-cfi: $(O)/tests/test_cfi_libdw
	$(O)/tests/test_cfi_libdw --full --seconds $(CHECK_CFI_SECONDS)

# The same over Debian's arm64 objects: the multiarch libraries installed here and the
# programs and libraries of some forty arm64 packages, unpacked into $(O)/cfi-arm64.
check-cfi-arm64: $(O)/tests/test_cfi_libdw
	tests/unit/arm64_objects.sh $(O)/cfi-arm64
	$(O)/tests/test_cfi_libdw --full --seconds $(CHECK_CFI_SECONDS) $(O)/cfi-arm64/root /usr/lib/aarch64-linux-gnu

# `make install`: the binary, the systemd unit (its paths rewritten for PREFIX and
# SYSCONFDIR), the documentation, the example alert rules, and an example agent.yaml
# that never replaces an existing one. DESTDIR stages it all under another root.
# The documentation is every document the README and the guides link to, in one folder.
INSTALL_DOCS := README.md BENCHMARKS.md LICENSE $(wildcard docs/*.md)
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
DOCDIR     ?= $(PREFIX)/share/doc/prowl
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc

# Mutation check (not part of `make test`): breaks chosen lines, one stage or more each, one
# at a time in a scratch copy; the tests that cover each must fail. See docs/testing.md.
mutation: tools
	tests/mutation.sh

install: all
	install -D -m 0755 $(O)/prowl $(DESTDIR)$(BINDIR)/prowl
	install -d -m 0755 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	sed -e 's|/usr/local/bin/prowl|$(BINDIR)/prowl|g' -e 's|/usr/local/share/doc/prowl|$(DOCDIR)|g' \
	    -e 's|/etc/prowl/|$(SYSCONFDIR)/prowl/|g' packaging/prowl.service > $(DESTDIR)$(UNITDIR)/prowl.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/prowl.service
	install -m 0644 $(INSTALL_DOCS) packaging/prometheus/prowl-alerts.yaml $(DESTDIR)$(DOCDIR)/
	install -m 0644 packaging/prowl.yaml $(DESTDIR)$(DOCDIR)/agent.yaml.example
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/prowl/agent.yaml ]; then \
		echo "keeping $(DESTDIR)$(SYSCONFDIR)/prowl/agent.yaml (the example is $(DESTDIR)$(DOCDIR)/agent.yaml.example)"; \
	else \
		install -D -m 0600 packaging/prowl.yaml $(DESTDIR)$(SYSCONFDIR)/prowl/agent.yaml; \
	fi

# `make deb`: the Debian package, built by dpkg-buildpackage and debhelper from
# packaging/debian/ (whose rules call `make all` and `make install`). debian/ must sit at
# the top of the source tree, so the tree (git's files, or all but build output) is
# copied to $(O)/deb/src with it; the packages land in $(O)/deb/.
DEB_VERSION = $(shell dpkg-parsechangelog -l packaging/debian/changelog -S Version)
DEB_ARCH    = $(if $(filter arm64,$(ARCH)),arm64,$(shell dpkg --print-architecture))
# make deb ARCH=arm64 on another machine: dpkg-buildpackage's cross build. -d: the
# build tools (clang, llvm, bpftool) of this machine serve it, which Build-Depends cannot
# say (Debian 12 does not mark them Multi-Arch: foreign); the arm64 libraries are checked
# by the build itself (packaging/install-deps.sh arm64 installs them).
DEB_CROSS   = $(if $(filter-out $(HOST_ARCH),$(ARCH)),-a $(DEB_ARCH) -d)
DEB        := $(O)/deb/prowl_$(DEB_VERSION)_$(DEB_ARCH).deb
deb:
	rm -rf $(O)/deb && mkdir -p $(O)/deb/src
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
			tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C $(O)/deb/src -xf -; \
	else \
		tar --exclude=./build --exclude='./build-*' -cf - . | tar -C $(O)/deb/src -xf -; \
	fi
	rm -rf $(O)/deb/src/debian && cp -r packaging/debian $(O)/deb/src/debian
	cd $(O)/deb/src && dpkg-buildpackage -b -us -uc $(DEB_CROSS) -j$$(nproc) >../build.log 2>&1 || \
		{ tail -30 ../build.log; echo "make deb: dpkg-buildpackage failed; the whole log is $(O)/deb/build.log"; exit 1; }
	rm -rf $(O)/deb/src
	@ls -l $(O)/deb/*.deb

# `make image`: an OCI image layout for the DaemonSet, $(O)/image/oci (tag VERSION), and the
# same as one archive, $(O)/image/prowl-oci.tar. Its root file system is Debian 12 made
# by mmdebstrap with the package of `make deb` installed by apt.
image: deb
	packaging/oci/build-image.sh $(DEB) $(O)/image

# `make image-index`: this machine's image and the arm64 one (make image ARCH=arm64, in
# $(O)-arm64) under one tag: an OCI image index, $(O)/image-index/oci and its archive.
image-index: image
	$(MAKE) ARCH=arm64 O=$(O)-arm64 image
	packaging/oci/merge-index.sh $(O)/image-index $(O)/image/oci $(O)-arm64/image/oci

# `make package-test`: builds the package and the image (and the image index with the
# arm64 image), installs the package with dpkg
# into a fresh Debian 12 root and runs prowl from it and from the image (slow: a
# bootstrap takes minutes; the roots are cached under $(O)/package-cache).
package-test: image-index workloads tools
	PROWL_TEST_BUILD=$(O) PROWL_DEB=$(DEB) /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/package

clean:
	rm -rf build build-san build-fuzz build-arm64

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
