# hps: heterogeneous parameter-server training, as Unix tools.
#
#   make            build bin/hps-*
#   make check      install missing packages, build, run every test
#   make test T="test_train tests/cli/train.bats"
#                   only those tests: unit test binaries or fuzz replays by
#                   name, bats files by path (HACKING.md, "Run one test")
#   make demo       install missing packages, build, run the pipeline on generated data
#   make asan       the test suite under AddressSanitizer + UBSan (build-asan/)
#   make check-cluster  hps-train across 3 test hosts (network namespaces; root);
#                   SAN=1 runs them on the asan build
#   make fuzz       libFuzzer targets of every parser (build-fuzz/), run over their
#                   seeds; FUZZ_SECONDS=N fuzzes each for N seconds
#   make fuzz-cov   each fuzz target's coverage of lib/ over its inputs and corpus
#   make install    PREFIX=/usr/local DESTDIR=
#   make CUDA=0     build without the CUDA kernels even where nvcc exists
#   make MPI=0      build without Open MPI: hps-train runs as one process only
#   make golden     rewrite the golden files of tests/cli from this build's output
#   make bench-plan, bench-jobs, bench-shard, bench-train, bench-dist, bench-fidelity,
#   bench-cluster, bench-tables, bench-planted   benchmarks, not in make check (tests/bench/README.md)
#   make clean      remove bin/ and every build directory (build, build-*)
#   make V=1        show the full command lines

VERSION   := 0.1.0
PREFIX    ?= /usr/local
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions

# Where binaries go: bin/ normally, build-asan/bin for `make asan`.
BIN       ?= bin

CC        ?= cc
OPT       ?= -O2 -g
SAN       ?=
WARN      := -Wall -Wextra -Werror -Wmissing-prototypes
HPS_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) $(OPT) $(SAN) -fopenmp -pthread -Ilib \
             -DHPS_VERSION=\"$(VERSION)\" $(CUDA_DEFS) $(MPI_CFLAGS) $(CFLAGS)

# Quiet: one short line per step; V=1 for the full commands.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2)
endif
HPS_LDLIBS = -ljansson -lzstd -lcrypto -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -lm \
             $(CUDA_LIBS) $(MPI_LIBS) $(LDLIBS)
# Open MPI (lib/dist): the same binary runs alone or as one rank under mpirun.
# mpicc knows the include and library flags; without it the build stops here
# rather than failing later on a missing mpi.h.  MPI=0 builds without Open
# MPI: hps-train then runs as one process only (lib/dist/dist_none.c).
MPI       ?= 1
MPICC     ?= mpicc
ifeq ($(MPI),1)
MPI_CFLAGS := -DHPS_MPI=1 $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null)
ifeq ($(strip $(MPI_LIBS)),)
ifeq ($(filter deps check asan fuzz fuzz-cov demo clean check-cluster,$(MAKECMDGOALS)),)
$(error Open MPI not found ($(MPICC) --showme failed): run 'make deps' or apt-get install libopenmpi-dev openmpi-bin, or build without it: make MPI=0)
endif
endif
DIST_OFF  := lib/dist/dist_none.c
else
MPI_CFLAGS :=
MPI_LIBS   :=
DIST_OFF  := $(filter-out lib/dist/dist_none.c lib/dist/dist_rebalance.c lib/dist/dist_launch.c,$(wildcard lib/dist/*.c))
endif
# OpenBLAS built on OpenMP: its threads and the kernels' OpenMP loops then share
# one pool.  With the pthread build the two pools spin against each other and
# a 2-thread fc layer ran 3x slower than on 1 thread (tests/bench/README.md, Performance notes).
MULTIARCH   := $(shell $(CC) -print-multiarch 2>/dev/null)
OPENBLAS_DIR ?= /usr/lib/$(MULTIARCH)/openblas-openmp
HPS_LDFLAGS = $(SAN) -fopenmp -pthread $(LDFLAGS)

# ---- CUDA: detected, or forced with CUDA=0/1 --------------------------------
NVCC      ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(origin CUDA),undefined)
CUDA      := $(if $(NVCC),1,0)
endif
CUDA_HOME ?= $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)),/usr/local/cuda)
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
# Objects of each configuration apart, so that CUDA=0 and CUDA=1 builds, or
# builds of other OPT or SAN flags, never mix: the defaults build in build/,
# others in a directory named after a digest of their flags.
CONFIG_TAG := $(if $(filter-out -O2 -g,$(OPT))$(SAN),-$(shell printf '%s' '$(OPT) $(SAN)' | md5sum | cut -c1-8))
BUILD     ?= build$(if $(filter 1,$(CUDA)),,-nocuda)$(if $(filter 1,$(MPI)),,-nompi)$(CONFIG_TAG)
ifeq ($(CUDA),1)
CUDA_DEFS := -DHPS_CUDA=1 -I$(CUDA_HOME)/include
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
CU_SRC    := $(wildcard lib/*/*.cu)
else
CUDA_DEFS :=
CUDA_LIBS :=
CU_SRC    :=
endif

# ---- sources ----------------------------------------------------------------
LIB_SRC   := $(filter-out $(DIST_OFF),$(wildcard lib/*/*.c))
# The rl policy built into hps-plan (lib/plan/rl-policy.json), as a C string.
POLICY    := lib/plan/rl-policy.json
POLICY_C  := $(BUILD)/gen/plan_policy_text.c
# the CUDA objects first: nvcc's one long compile then runs beside the C
# files under -j, not after them
LIB_OBJ   := $(CU_SRC:%.cu=$(BUILD)/%.cu.o) $(LIB_SRC:%.c=$(BUILD)/%.o) $(POLICY_C:.c=.o)
LIBHPS    := $(BUILD)/libhps.a
TOOLS     := $(patsubst cmd/%.c,%,$(wildcard cmd/hps-*.c))
BINS      := $(TOOLS:%=$(BIN)/%)
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
# what tests and benchmarks build on and the tools never call
TESTLIB_SRC := $(wildcard tests/lib/*.c)
TESTLIB   := $(BUILD)/libhps-test.a
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
MAN_PAGES := $(wildcard man/*.[157])

# fuzz targets (see fuzzing, below) and their seeds
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
REPLAY_BINS  := $(FUZZ_NAMES:%=$(BUILD)/tests/replay_%)
FUZZ_SECONDS ?=
FUZZ_SEEDS_model    := testdata/models testdata/models/bad
FUZZ_SEEDS_cluster  := testdata/clusters
FUZZ_SEEDS_profile  := testdata/profiles tests/fuzz/seeds/profile
FUZZ_SEEDS_sheet    := testdata/devices
FUZZ_SEEDS_plan     := testdata/plans
FUZZ_SEEDS_criteo   := testdata/data
FUZZ_SEEDS_libsvm   := testdata/data
FUZZ_SEEDS_shard    := tests/fuzz/seeds/shard
FUZZ_SEEDS_manifest := tests/fuzz/seeds/manifest
FUZZ_SEEDS_ckpt     := tests/fuzz/seeds/ckpt
FUZZ_SEEDS_safetensors := tests/fuzz/seeds/safetensors
FUZZ_SEEDS_jobs     := testdata/jobs tests/fuzz/seeds/jobs
FUZZ_SEEDS_delta    := tests/fuzz/seeds/delta
FUZZ_JSON    := model cluster profile plan manifest sheet jobs
fuzz_inputs   = tests/fuzz/regress/$(1) $(FUZZ_SEEDS_$(1))
empty :=
space := $(empty) $(empty)
FUZZ_DEFS     = -DHPS_TESTDATA=\"$(CURDIR)/testdata\" -Itests/fuzz

# Binaries are relinked when the configuration changes (CUDA, sanitizers):
# the stamp is rewritten only when it differs.
CONFIG_STAMP := $(BIN)/.config
# The commit that --version names; hps_cli.o is rebuilt when it changes.
COMMIT       := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
CONFIG_NOW   := CUDA=$(CUDA) MPI=$(MPI) SAN=$(SAN) OPT=$(OPT) BUILD=$(BUILD) COMMIT=$(COMMIT)

DEB_PKGS  := build-essential pkg-config libjansson-dev libzstd-dev libssl-dev zstd libopenblas-openmp-dev \
             libopenmpi-dev openmpi-bin libcmocka-dev bats python3 python3-numpy python3-torch time \
             clang libclang-rt-14-dev libomp-14-dev librsvg2-bin graphviz \
             iproute2 util-linux procps strace parallel

# keep objects that pattern rules built on the way to a binary
.SECONDARY:

.PHONY: all deps check test asan fuzz fuzz-targets fuzz-cov golden demo install uninstall clean FORCE \
        bench-plan bench-jobs bench-shard bench-train bench-dist check-cluster bench-cluster plan-policy check-policy bench-fidelity bench-tables bench-planted
all: $(BINS)

$(CONFIG_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CONFIG_NOW)' | cmp -s - $@ || echo '$(CONFIG_NOW)' > $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(HPS_CFLAGS) -MMD -MP -c $< -o $@

$(POLICY_C): $(POLICY)
	@mkdir -p $(dir $@)
	{ echo '/* generated by the Makefile from $(POLICY) */'; echo 'const char plan_policy_text[] ='; \
	  sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$$/\\n"/' $(POLICY); echo ';'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(HPS_CFLAGS) -c $< -o $@

# The CPU kernels: sqrtf without errno, so that the optimizer loops vectorize;
# and the vectorizer's dynamic cost model: -O2's "very cheap" one leaves a
# loop scalar unless its trip count is a multiple of the vector width (a row
# of 13 or 16 floats, a batch's activations), which is most of them.  It
# never reassociates a sum, so the floats stay those of the scalar loop.
# (GCC's flag: clang, the fuzz build's compiler, has no such model.)
$(BUILD)/lib/kernels/%.o: HPS_CFLAGS += -fno-math-errno $(if $(findstring clang,$(CC)),,-fvect-cost-model=dynamic)

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)
	$(Q)$(NVCC) -O2 -std=c++17 -Ilib -DHPS_VERSION=\"$(VERSION)\" $(CUDA_DEFS) $(CUDA_ARCH) \
	  -Xcompiler -Wall,-Werror -MD -MF $(@:.o=.d) -c $< -o $@

$(BUILD)/lib/core/hps_cli.o: HPS_CFLAGS += -DHPS_COMMIT=\"$(COMMIT)\"
$(BUILD)/lib/core/hps_cli.o: $(CONFIG_STAMP)

$(LIBHPS): $(LIB_OBJ)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

$(BIN)/%: $(BUILD)/cmd/%.o $(LIBHPS) $(CONFIG_STAMP)
	@mkdir -p $(dir $@)
	$(call say,LINK,$@)
	$(Q)$(CC) $(HPS_LDFLAGS) $(BUILD)/cmd/$*.o $(LIBHPS) -o $@ $(HPS_LDLIBS)

$(TESTLIB): $(TESTLIB_SRC:%.c=$(BUILD)/%.o)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

$(BUILD)/tests/lib/%.o: HPS_CFLAGS += -Itests/lib

$(BUILD)/tests/%: tests/unit/%.c $(TESTLIB) $(LIBHPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(HPS_CFLAGS) -Itests/unit -Itests/lib -DHPS_TESTDATA=\"$(CURDIR)/testdata\" -MMD -MP $< \
	  $(TESTLIB) $(LIBHPS) -o $@ $(HPS_LDFLAGS) $(HPS_LDLIBS) -lcmocka

# benchmarks (tests/bench/*.c), built here and run by their scripts
$(BUILD)/bench/%: tests/bench/%.c $(TESTLIB) $(LIBHPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(HPS_CFLAGS) -Itests/lib -MMD -MP $< $(TESTLIB) $(LIBHPS) -o $@ $(HPS_LDFLAGS) $(HPS_LDLIBS)

-include $(LIB_OBJ:.o=.d) $(TOOLS:%=$(BUILD)/cmd/%.d) $(TESTLIB_SRC:%.c=$(BUILD)/%.d) $(UNIT_BINS:=.d) \
         $(BUILD)/bench/bench_plan.d $(BUILD)/bench/bench_jobs.d $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%.d)

# Testing aids (--slowdown, HPS_TRAIN_KILL_AT_STEP, HPS_CRASH_AT, HPS_TRAIN_GATHER_PIECE) exist only in
# the test builds of hps-train and hps-shard, $(TEST_BIN)/: the files that hold
# them compiled again with HPS_TEST_HOOKS.  What `make` and `make install` give
# users has none.
TEST_BIN  := $(BUILD)/test-bin
HOOK_LIB  := lib/core/hps_io.c lib/train/train_run.c $(if $(filter 1,$(MPI)),lib/dist/dist_worker.c lib/dist/dist_shard.c)
HOOK_SRC  := cmd/hps-train.c $(HOOK_LIB)
HOOK_OBJ  := $(HOOK_SRC:%.c=$(BUILD)/hooks/%.o)
TEST_TOOLS := $(TEST_BIN)/hps-train $(TEST_BIN)/hps-shard

$(BUILD)/hooks/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(HPS_CFLAGS) -DHPS_TEST_HOOKS -MMD -MP -c $< -o $@

# the hooked objects come first: the archive's own copies are then never pulled in
$(TEST_BIN)/hps-train: $(HOOK_OBJ) $(LIBHPS)
	@mkdir -p $(dir $@)
	$(CC) $(HPS_LDFLAGS) $(HOOK_OBJ) $(LIBHPS) -o $@ $(HPS_LDLIBS)

$(TEST_BIN)/hps-shard: $(BUILD)/cmd/hps-shard.o $(BUILD)/hooks/lib/core/hps_io.o $(LIBHPS)
	@mkdir -p $(dir $@)
	$(CC) $(HPS_LDFLAGS) $^ -o $@ $(HPS_LDLIBS)

-include $(HOOK_OBJ:.o=.d)

# ---- packages ---------------------------------------------------------------
# Installs what is missing (as root), or prints the exact command and fails.
deps:
	@missing=""; \
	for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "hps: missing packages; run: sudo apt-get install -y$$missing" >&2; exit 1; \
	fi; \
	echo "hps: installing$$missing" >&2; \
	apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >&2

# ---- tests ------------------------------------------------------------------
# make check builds on every core unless a -j was given: CI runs a bare
# `make check`, and its budget (10 minutes) has no room for a serial build of
# the C files and nvcc's.
NPROC   := $(shell nproc 2>/dev/null || echo 1)
CHECK_J  = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))
check: deps
	@$(MAKE) --no-print-directory $(CHECK_J) all
	@$(MAKE) --no-print-directory $(CHECK_J) test

# REPLAY_BINS: the fuzz targets replayed over their seeds (see "fuzzing").
# T="test_train replay_model tests/cli/train.bats" runs only those: unit test
# binaries and fuzz replays by name (build/tests/NAME), bats files by path
# (a bare name is looked up in tests/cli/); the tools are built for bats only.
T_BATS := $(foreach f,$(filter %.bats,$(T)),$(if $(wildcard $(f)),$(f),tests/cli/$(f)))
T_BINS := $(addprefix $(BUILD)/tests/,$(notdir $(basename $(filter-out %.bats,$(T)))))
test: $(if $(T),$(T_BINS) $(if $(T_BATS),$(BINS) $(TEST_TOOLS)),$(BINS) $(UNIT_BINS) $(REPLAY_BINS) $(TEST_TOOLS))
	@HPS_BIN=$(CURDIR)/$(BIN) HPS_TEST_BIN=$(CURDIR)/$(TEST_BIN) \
	  tests/run.sh $(if $(T),--only $(T_BINS) $(T_BATS),$(UNIT_BINS) $(REPLAY_BINS))

# Sanitizers: CUDA=0 because the CUDA runtime and ASan's shadow memory collide.
# Under mpirun (tests/cli/dist.bats) Open MPI's own allocations at exit are
# suppressed by tests/lsan-mpi.supp, which that test file puts in LSAN_OPTIONS.
ASAN_MAKE := $(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/bin CUDA=0 OPT="-O1 -g" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
asan: deps
	@$(ASAN_MAKE) test

# Test hosts are network namespaces on this machine (tests/cluster/hosts.bash):
# root, iproute2 and util-linux's unshare; elsewhere it says "skipped: why".
# make check-cluster SAN=1: the same tests on make asan's build.
check-cluster: deps
ifeq ($(SAN),1)
	@$(ASAN_MAKE) check-cluster
else
	@$(MAKE) --no-print-directory all $(TEST_TOOLS)
	@HPS_BIN=$(CURDIR)/$(BIN) HPS_TEST_BIN=$(CURDIR)/$(TEST_BIN) tests/cluster/run.sh
endif

# ---- fuzzing ----------------------------------------------------------------
# tests/fuzz/fuzz_NAME.c is one parser of untrusted bytes.  `make check` runs
# each over its seeds and tests/fuzz/regress/NAME (the crashers found so far)
# with tests/fuzz/replay.c as main; `make fuzz` builds them with clang and
# libFuzzer under ASan+UBSan and runs them: over the same inputs, or for
# FUZZ_SECONDS each.  A crash, leak or timeout fails; its input is left in
# build-fuzz/crashes/ (copy it into tests/fuzz/regress/NAME once fixed).
# The fuzz build, and fuzz-cov's, alone define
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (FUZZ_CLANG): checksums are
# computed but a mismatch passes (hps_checksum_ok), so that mutations reach
# the parsers behind them.  `make fuzz-cov` builds the replays with clang's
# source-based coverage and prints each target's coverage of lib/ over its
# inputs and build-fuzz/corpus/NAME (tests/fuzz/cov.sh).

$(BUILD)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(LIBHPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(HPS_CFLAGS) $(FUZZ_DEFS) -DHPS_FUZZ_NAME=\"fuzz_$*\" \
	  -DHPS_FUZZ_INPUTS=\"$(subst $(space),:,$(addprefix $(CURDIR)/,$(call fuzz_inputs,$*)))\" \
	  $< tests/fuzz/replay.c $(LIBHPS) -o $@ $(HPS_LDFLAGS) $(HPS_LDLIBS)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIBHPS)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(HPS_CFLAGS) $(FUZZ_DEFS) -fsanitize=fuzzer -MMD -MP $< $(LIBHPS) -o $@ $(HPS_LDFLAGS) $(HPS_LDLIBS)

fuzz-targets: $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)

FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# clang at -O1 reports the kernels' `omp simd` loops it leaves scalar as
# warnings (errors under -Werror); the fuzz build is about the parsers
FUZZ_CLANG := -Wno-pass-failed -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
fuzz: deps
	@$(MAKE) --no-print-directory BUILD=build-fuzz BIN=build-fuzz/bin CC=clang CUDA=0 OPT="-O1 -g" \
	  SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" CFLAGS="$(CFLAGS) $(FUZZ_CLANG)" fuzz-targets
	@$(foreach t,$(FUZZ_NAMES),tests/fuzz/run.sh build-fuzz $(t) "$(FUZZ_SECONDS)" \
	  $(if $(filter $(t),$(FUZZ_JSON)),tests/fuzz/json.dict,-) $(call fuzz_inputs,$(t)) &&) true

fuzz-cov: deps
	@$(MAKE) --no-print-directory BUILD=build-cov BIN=build-cov/bin CC=clang CUDA=0 OPT="-O1 -g" \
	  SAN="-fprofile-instr-generate -fcoverage-mapping" CFLAGS="$(CFLAGS) $(FUZZ_CLANG)" \
	  $(FUZZ_NAMES:%=build-cov/tests/replay_%)
	@tests/fuzz/cov.sh build-cov build-fuzz/corpus $(FUZZ_NAMES)

demo: deps
	@$(MAKE) --no-print-directory all
	@tests/demo.sh $(CURDIR)/$(BIN)

bench-plan: all $(BUILD)/bench/bench_plan
	@HPS_BENCH_PLAN=$(CURDIR)/$(BUILD)/bench/bench_plan tests/bench/$@.sh $(CURDIR)/$(BIN)

bench-jobs: all $(BUILD)/bench/bench_jobs
	@HPS_BENCH_JOBS=$(CURDIR)/$(BUILD)/bench/bench_jobs tests/bench/$@.sh $(CURDIR)/$(BIN)

bench-shard bench-train bench-fidelity bench-tables bench-planted: all
	@tests/bench/$@.sh $(CURDIR)/$(BIN)

# bench-dist slows a rank with the test build's --slowdown
bench-dist bench-cluster: all $(TEST_TOOLS)
	@HPS_TEST_BIN=$(CURDIR)/$(TEST_BIN) tests/bench/$@.sh $(CURDIR)/$(BIN)

# Re-trains the rl policy built into hps-plan over seeded random instances
# (hps-plan(1), --train-policy): deterministic, the same file on any machine.
PLAN_POLICY_TRAIN := --seed 1 --instances 512 --episodes 512
plan-policy: $(BIN)/hps-plan
	$(BIN)/hps-plan --train-policy $(POLICY) $(PLAN_POLICY_TRAIN)
	@$(MAKE) --no-print-directory all

# The built-in policy is what plan-policy writes (about 2 min of CPU, more
# than make check's budget allows: CI runs it beside make check, .ci/run).
check-policy: $(BIN)/hps-plan
	@HPS_BIN=$(CURDIR)/$(BIN) HPS_CHECK_POLICY=1 tests/run.sh --only tests/cli/policy.bats

# The golden files of tests/cli, rewritten from this build (review the diff).
golden: all
	@HPS_UPDATE_GOLDEN=1 HPS_BIN=$(CURDIR)/$(BIN) bats tests/cli/plan.bats tests/cli/shard.bats tests/cli/views.bats
	@git status --short tests/cli/golden

# ---- install ----------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	  $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 755 $(BINS) $(DESTDIR)$(BINDIR)
	for p in $(MAN_PAGES); do s=$${p##*.}; install -m 644 $$p $(DESTDIR)$(MANDIR)/man$$s/; done
	install -m 644 completions/bash/* $(DESTDIR)$(BASHCOMPDIR)/
	install -m 644 completions/zsh/* $(DESTDIR)$(ZSHCOMPDIR)/

uninstall:
	rm -f $(TOOLS:%=$(DESTDIR)$(BINDIR)/%)
	for p in $(MAN_PAGES); do s=$${p##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$${p##*/}; done
	for f in completions/bash/*; do rm -f $(DESTDIR)$(BASHCOMPDIR)/$${f##*/}; done
	for f in completions/zsh/*; do rm -f $(DESTDIR)$(ZSHCOMPDIR)/$${f##*/}; done

# every configuration's objects (build, build-nocuda, build-asan, build-<digest>, ...)
clean:
	rm -rf build build-* bin
