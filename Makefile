# lumus — build, test and install.
# LuaRocks passes LUA_INCDIR, CFLAGS, LIBFLAG, INST_LIBDIR and INST_LUADIR; the defaults
# below fit a Debian machine with liblua5.4-dev.

# The Lua to build for: 5.4 (the default), 5.3, 5.1 or jit (LuaJIT 2.1). Each has its own
# build directory (build/ for 5.4; build-5.3/, build-5.1/, build-jit/), so all can be built
# side by side; its interpreter, headers, library and Debian packages are set here.
# LuaRocks passes no version, only LUA_INCDIR (and LUA): then the headers tell it.
ifeq ($(origin LUA_VERSION),undefined)
  ifneq ($(LUA_INCDIR),)
    LUA_VERSION := $(shell if [ -f "$(LUA_INCDIR)/luajit.h" ]; then echo jit; else \
      sed -n 's/^\#define LUA_VERSION_NUM[[:space:]]*50\([0-9]\).*/5.\1/p' "$(LUA_INCDIR)/lua.h" 2>/dev/null; fi)
  endif
endif
LUA_VERSION ?= 5.4
ifeq ($(LUA_VERSION),)
  LUA_VERSION := 5.4
endif
ifeq ($(LUA_VERSION),5.4)
  LUA_BIN := lua5.4
  LUA_INC := /usr/include/lua5.4
  LUA_LNK := -llua5.4
  LUA_ABI := 5.4
  LUA_DEBS := lua5.4 liblua5.4-dev
  BUILD_SUFFIX :=
else ifeq ($(LUA_VERSION),5.3)
  LUA_BIN := lua5.3
  LUA_INC := /usr/include/lua5.3
  LUA_LNK := -llua5.3
  LUA_ABI := 5.3
  LUA_DEBS := lua5.3 liblua5.3-dev
  BUILD_SUFFIX := -5.3
else ifeq ($(LUA_VERSION),5.1)
  LUA_BIN := lua5.1
  LUA_INC := /usr/include/lua5.1
  LUA_LNK := -llua5.1
  LUA_ABI := 5.1
  LUA_DEBS := lua5.1 liblua5.1-0-dev
  BUILD_SUFFIX := -5.1
else ifeq ($(LUA_VERSION),jit)
  LUA_BIN := luajit
  LUA_INC := /usr/include/luajit-2.1
  LUA_LNK := -lluajit-5.1
  LUA_ABI := 5.1
  LUA_DEBS := luajit libluajit-5.1-dev
  BUILD_SUFFIX := -jit
else
  $(error LUA_VERSION must be 5.4, 5.3, 5.1 or jit (LuaJIT 2.1), got '$(LUA_VERSION)')
endif

LUA        ?= $(LUA_BIN)
LUA_INCDIR ?= $(LUA_INC)
CC         ?= cc
CFLAGS     ?= -O2 -fPIC
LIBFLAG    ?= -shared
WARN       ?= -std=c11 -Wall -Wextra -pedantic
# Only the public API (lumus.h's LUMUS_API: luaopen_lumus_core and lumus_*) is exported.
VISIBILITY := -fvisibility=hidden
# CI (CI=true) treats warnings as errors; a user's build need not.
ifneq ($(CI),)
WARN += -Werror
endif
# jansson parses and writes safetensors headers (src/safetensors.c).
JANSSON_CFLAGS := $(shell pkg-config --cflags jansson 2>/dev/null)
JANSSON_LIBS   := $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
LIBS       ?= -lvulkan $(JANSSON_LIBS) -lm
GLSLC      ?= glslc
SPIRV_VAL  ?= spirv-val
# glslang 13+ and a matching spirv-val for the variants with COOP_KHR=1
# (VK_KHR_cooperative_matrix). Optional: without them those variants are built empty and
# lumus uses the VK_NV_cooperative_matrix ones. `make deps` installs both as glslang-khr
# and spirv-val-khr (tools/glslang_khr.sh); on a distribution with glslang 13+, set
# GLSLANG_KHR=glslang SPIRV_VAL_KHR=spirv-val.
GLSLANG_KHR   ?= $(shell command -v glslang-khr 2>/dev/null)
SPIRV_VAL_KHR ?= $(shell command -v spirv-val-khr 2>/dev/null)
BUSTED     ?= busted
PREFIX     ?= /usr/local
INST_LIBDIR ?= $(PREFIX)/lib/lua/$(LUA_ABI)
INST_LUADIR ?= $(PREFIX)/share/lua/$(LUA_ABI)
INST_INCDIR ?= $(PREFIX)/include
INST_STATICDIR ?= $(PREFIX)/lib
# Hosts (examples/host, tests/) link Lua itself.
LUA_LIB    ?= $(LUA_LNK)
AR         ?= ar

SHELL   := /bin/bash
BUILD   := build$(BUILD_SUFFIX)
# Shaders do not depend on the Lua version: every version's build uses build/'s.
SPV_DIR := build/shaders
MODULE  := $(BUILD)/lumus/core.so

# Debian packages the project builds, runs and tests with.
DEB_PACKAGES := lua5.4 liblua5.4-dev libvulkan-dev glslc spirv-tools mesa-vulkan-drivers \
                lua-busted luarocks vulkan-validationlayers libjansson-dev
# The other Luas lumus supports (`make test LUA_VERSION=...`; .ci/run tests them all).
DEB_PACKAGES += lua5.3 liblua5.3-dev lua5.1 liblua5.1-0-dev luajit libluajit-5.1-dev

SRC := $(wildcard src/*.c src/ops/*.c)
OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(SRC))
HDR := $(wildcard src/*.h src/ops/*.h)

# Shaders: every SPIR-V variant is one line of shaders/variants.def,
# LM_SHADER(ID, source, defines), which C reads too (the shader ids and embedded code).
# SHADER_ROWS: one word per variant, id:ID:source[:-DNAME=VALUE...] (id = ID in lower
# case, the name of its built files).
SHADER_DEF  := shaders/variants.def
SHADER_AWK  := /^LM_SHADER\(/ { id = $$2; src = $$3; gsub(/ /, "", id); gsub(/ /, "", src); \
               row = tolower(id) ":" id ":" src; n = split($$4, defs, " "); \
               for (i = 1; i <= n; i++) row = row ":-D" defs[i]; print row }
SHADER_ROWS := $(shell awk -F '[(),]' '$(SHADER_AWK)' $(SHADER_DEF))
shader_field = $(word $(2),$(subst :, ,$(1)))
SHADERS     := $(foreach r,$(SHADER_ROWS),$(call shader_field,$(r),1))
# The code of each variant as numbers, and code_<ID>[] arrays of them for src/shaders.c.
SHADER_CODE := $(SPV_DIR)/shader_code.inc
SHADER_INC  := $(SHADERS:%=$(SPV_DIR)/%.inc) $(SHADER_CODE)
# What every shader may include; the C side includes the table and the op codes.
SHADER_LIB  := $(wildcard shaders/common/*.glsl shaders/common/*.h)
HDR         += $(SHADER_DEF) $(wildcard shaders/common/*.h)
GLSL_FLAGS  := --target-env=vulkan1.2 -O -Ishaders

# The static library for hosts (lumus.h): the module's objects plus the Lua files.
STATIC_LIB := $(BUILD)/liblumus.a
LUA_FILES  := $(sort $(wildcard lua/lumus/*.lua lua/lumus/*/*.lua))
EMBED_INC  := $(BUILD)/embed/lua_modules.inc
PRELOAD_O  := $(BUILD)/obj/embed/preload.o
HOST_FLAGS := -O2 $(WARN) -I$(LUA_INCDIR) -Isrc
HOST_LIBS  := $(LUA_LIB) $(LIBS) -lpthread
HOST_BINS  := $(BUILD)/examples/host_static $(BUILD)/examples/host_require
CTEST_BINS := $(BUILD)/tests/threads $(BUILD)/tests/wrap $(BUILD)/tests/close_loop $(BUILD)/tests/capture_host

.PHONY: all deps test example examples install uninstall clean check-shaders valgrind ctest tsan sanitize fuzz fuzz-safetensors

all: $(MODULE)

# LÖVE under Xvfb, for examples/love and spec/love_spec.lua.
DEB_PACKAGES += love xvfb xauth

# `make deps` installs the Debian packages when run as root; otherwise names them. No
# other target installs anything: a plain build (make, make all, luarocks make) checks
# its tools in $(BUILD)/.deps below and fails naming what is missing.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "make deps: installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "make deps: please install these Debian packages (as root):"; \
	    echo "  apt-get install$$missing"; exit 1; \
	  fi; \
	fi
	@if [ -z "$(GLSLANG_KHR)" ] || [ -z "$(SPIRV_VAL_KHR)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "make deps: glslang 13+ from Debian 13 for the KHR cooperative-matrix shaders"; \
	    sh tools/glslang_khr.sh || echo "make deps: (not installed: the NV shaders will be used)"; \
	  else \
	    echo "make deps: optional, as root: sh tools/glslang_khr.sh (glslang 13+ for the KHR cooperative-matrix shaders)"; \
	  fi; \
	fi

# The build's tools, checked (never installed) before anything is built: each missing
# one is named with the Debian package that has it. Phony, so a tool removed later is
# noticed; as an order-only prerequisite it rebuilds nothing.
.PHONY: $(BUILD)/.deps
$(BUILD)/.deps:
	@missing=""; \
	need() { command -v "$$1" >/dev/null 2>&1 || missing="$$missing\n  $$1 (Debian package $$2)"; }; \
	need "$(firstword $(CC))" gcc; need "$(GLSLC)" glslc; need "$(SPIRV_VAL)" spirv-tools; need "$(LUA)" $(firstword $(LUA_DEBS)); \
	[ -f "$(LUA_INCDIR)/lua.h" ] || missing="$$missing\n  $(if $(filter jit,$(LUA_VERSION)),LuaJIT,Lua $(LUA_VERSION)) headers: $(LUA_INCDIR)/lua.h (Debian package $(lastword $(LUA_DEBS)))"; \
	echo '#include <vulkan/vulkan.h>' | $(CC) -E -x c - >/dev/null 2>&1 || \
	  missing="$$missing\n  Vulkan headers: vulkan/vulkan.h (Debian package libvulkan-dev)"; \
	echo '#include <jansson.h>' | $(CC) $(JANSSON_CFLAGS) -E -x c - >/dev/null 2>&1 || \
	  missing="$$missing\n  jansson headers: jansson.h (Debian package libjansson-dev)"; \
	if [ -n "$$missing" ]; then \
	  printf "make: missing to build lumus:$$missing\n(\`make deps\` installs the Debian packages, as root; glslc and spirv-val also come with the Vulkan SDK)\n" >&2; exit 1; \
	fi

# One variant (a row of SHADER_ROWS): compiled, checked by spirv-val, then compiled
# again as uint32_t numbers (-mfmt=num) for embedding.
define shader_rule
$(SPV_DIR)/$(call shader_field,$(1),1).inc: shaders/$(call shader_field,$(1),3) $(SHADER_LIB) $(SHADER_DEF) | $(BUILD)/.deps
	@mkdir -p $(SPV_DIR)
	$(GLSLC) $(GLSL_FLAGS) $(wordlist 4,99,$(subst :, ,$(1))) $$< -o $$(basename $$@).spv
	$(SPIRV_VAL) --target-env vulkan1.2 $$(basename $$@).spv
	$(GLSLC) $(GLSL_FLAGS) $(wordlist 4,99,$(subst :, ,$(1))) -mfmt=num $$< -o $$@
endef
# A COOP_KHR=1 variant: glslang 13+ for Vulkan 1.3 (SPIR-V 1.6, which
# VK_NV_cooperative_matrix2 needs; the include extension given on the command line, as
# glslc does), its spir-val, the words written out by od; without the tools one 0 word,
# which src/shaders.c reports as not built. Rebuilt when the tools appear or go.
KHR_TOOLS := $(SPV_DIR)/khr_tools.txt
define shader_rule_khr
$(SPV_DIR)/$(call shader_field,$(1),1).inc: shaders/$(call shader_field,$(1),3) $(SHADER_LIB) $(SHADER_DEF) $(KHR_TOOLS) | $(BUILD)/.deps
	@mkdir -p $(SPV_DIR)
ifneq ($(GLSLANG_KHR),)
	$(GLSLANG_KHR) -V --target-env vulkan1.3 -Ishaders '-P#extension GL_GOOGLE_include_directive : require' \
	  $(wordlist 4,99,$(subst :, ,$(1))) $$< -o $$(basename $$@).spv >/dev/null
	$(SPIRV_VAL_KHR) --target-env vulkan1.3 $$(basename $$@).spv
	od -An -v -tx4 $$(basename $$@).spv | tr -s ' \n' '\n\n' | sed '/^$$$$/d; s/^/0x/; s/$$$$/,/' > $$@
else
	@echo "$$(notdir $$@): no glslang 13+ (GLSLANG_KHR): built empty, the NV variant runs instead"
	@echo 0 > $$@
endif
endef
$(foreach r,$(SHADER_ROWS),$(eval $(call $(if $(findstring -DCOOP_KHR=1,$(r)),shader_rule_khr,shader_rule),$(r))))

# The KHR tools' paths; rewritten (so the KHR variants rebuild) only when they change.
.PHONY: khr-tools-check
khr-tools-check:
	@mkdir -p $(SPV_DIR)
	@echo "$(GLSLANG_KHR) $(SPIRV_VAL_KHR)" | cmp -s - $(KHR_TOOLS) || echo "$(GLSLANG_KHR) $(SPIRV_VAL_KHR)" > $(KHR_TOOLS)
$(KHR_TOOLS): khr-tools-check

$(SHADER_CODE): $(SHADER_DEF) | $(BUILD)/.deps
	@mkdir -p $(SPV_DIR)
	@{ echo '/* Generated by the Makefile from $(SHADER_DEF): do not edit. */'; \
	  $(foreach r,$(SHADER_ROWS),printf 'static const uint32_t code_%s[] = {\n#include "%s.inc"\n};\n' \
	    $(call shader_field,$(r),2) $(call shader_field,$(r),1);) } > $@

$(BUILD)/obj/shaders.o: $(SHADER_INC)

$(BUILD)/obj/%.o: src/%.c $(HDR) | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(VISIBILITY) $(WARN) $(JANSSON_CFLAGS) -I$(LUA_INCDIR) -Isrc -I$(SPV_DIR) -c $< -o $@

$(MODULE): $(OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAG) $(CFLAGS) -o $@ $(OBJ) $(LIBS)

$(EMBED_INC): $(LUA_FILES) src/embed/embed_lua.lua | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(LUA) src/embed/embed_lua.lua $@ $(LUA_FILES)

$(PRELOAD_O): src/embed/preload.c src/lumus.h $(EMBED_INC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(VISIBILITY) $(WARN) -I$(LUA_INCDIR) -Isrc -I$(BUILD)/embed -c $< -o $@

$(STATIC_LIB): $(OBJ) $(PRELOAD_O)
	rm -f $@
	$(AR) rcs $@ $^

# Host programs: the example host (linked with liblumus.a, or loading the module with
# plain require) and the C tests of the embedding API (run by spec/host_spec.lua).
$(BUILD)/examples/host_static: examples/host/host.c $(STATIC_LIB) src/lumus.h
	@mkdir -p $(dir $@)
	$(CC) $(HOST_FLAGS) -DLUMUS_STATIC $< -o $@ $(STATIC_LIB) $(HOST_LIBS)

$(BUILD)/examples/host_require: examples/host/host.c
	@mkdir -p $(dir $@)
	$(CC) $(HOST_FLAGS) $< -o $@ $(LUA_LIB) -lm

$(BUILD)/tests/%: tests/%.c tests/vk_host.c tests/vk_host.h $(STATIC_LIB) src/lumus.h
	@mkdir -p $(dir $@)
	$(CC) $(HOST_FLAGS) -Itests $< tests/vk_host.c -o $@ $(STATIC_LIB) $(HOST_LIBS)

examples: $(MODULE) $(STATIC_LIB) $(HOST_BINS) $(CTEST_BINS)

# The C tests alone (spec/host_spec.lua runs them too, under make test).
ctest: examples
	$(BUILD)/tests/wrap
	$(BUILD)/tests/threads
	$(BUILD)/tests/close_loop

# The threads test under ThreadSanitizer, lumus's sources instrumented (tests/tsan.supp
# says what is suppressed and why); with and without the validation layer.
TSAN_BIN := $(BUILD)/tsan/threads
$(TSAN_BIN): $(SRC) $(HDR) src/embed/preload.c tests/threads.c tests/vk_host.c tests/vk_host.h $(EMBED_INC) $(SHADER_INC)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -g -O1 -fsanitize=thread $(JANSSON_CFLAGS) -I$(LUA_INCDIR) -Isrc -I$(SPV_DIR) -I$(BUILD)/embed -Itests \
	  $(SRC) src/embed/preload.c tests/threads.c tests/vk_host.c -o $@ $(HOST_LIBS)

tsan: $(TSAN_BIN)
	TSAN_OPTIONS="suppressions=tests/tsan.supp halt_on_error=1" $(TSAN_BIN)
	TSAN_OPTIONS="suppressions=tests/tsan.supp halt_on_error=1" LUMUS_VALIDATION=1 $(TSAN_BIN)

# The README's run command: the main example on the default device.
example: $(MODULE)
	LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="$(BUILD)/?.so;;" $(LUA) examples/layer_norm.lua

# What a spec needs to run programs of this build: the interpreter (a fresh state), the
# build directory (host programs, C tests) and LUA_VERSION; the module itself is on
# package.cpath. A make a spec starts (build, install) sees only the variables the spec
# gives it, as from a shell: not this make's flags, nor its command line's Lua.
SPEC_ENV := env -u LUA_VERSION -u LUA -u LUA_INCDIR -u LUA_LIB MAKEFLAGS= MAKELEVEL= LUMUS_LUA="$(LUA)" LUMUS_BUILD="$(BUILD)" LUMUS_LUA_VERSION="$(LUA_VERSION)"

# The README's test command. Ends with a plain count line that CI reads.
test: $(MODULE) examples
	@set -o pipefail; $(SPEC_ENV) $(BUSTED) --lua=$(LUA) --cpath="$(BUILD)/?.so" -o TAP 2>&1 | tee $(BUILD)/test.tap; status=$$?; \
	  ok=$$(grep -c '^ok ' $(BUILD)/test.tap); bad=$$(grep -c '^not ok ' $(BUILD)/test.tap); \
	  echo "busted: $$ok passed, $$bad failed"; exit $$status

# Memcheck with zero errors and zero definitely-lost bytes required (--error-exitcode),
# over the specs of the core paths: tensors, transfers, the stream, hostile input, leaving
# with work in flight, the fuzz spec (fewer calls, a longer bound per call). The kernel
# sweeps (layer_norm, matmul, nn, ops) and the specs that build or run programs of their
# own (host, install, staging) take the whole suite past 20 minutes under valgrind.
# Then one script that closes the state with work in flight. The only suppressions
# (sanitize/valgrind.supp) are glibc dl-load's reads when the Vulkan loader opens the driver.
VALGRIND_SPECS ?= spec/tensor_spec.lua spec/async_spec.lua spec/hostile_spec.lua spec/interrupt_spec.lua \
                  spec/fuzz_spec.lua spec/reference_spec.lua spec/validation_spec.lua
VALGRIND := valgrind --error-exitcode=99 --suppressions=sanitize/valgrind.supp --leak-check=full \
            --show-leak-kinds=definite --errors-for-leak-kinds=definite
valgrind: $(MODULE) | $(BUILD)/.check-deps
	LUMUS_FUZZ_CALLS=5000 LUMUS_FUZZ_MAX_CALL_S=300 $(VALGRIND) $(LUA) $$(command -v $(BUSTED)) --lua=$(LUA) --ignore-lua $(VALGRIND_SPECS)
	LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="$(BUILD)/?.so;;" $(VALGRIND) $(LUA) spec/scripts/close_in_flight.lua close

# ---- Sanitizers: the module built with ASan + UBSan into build-asan/, the whole suite run
# by the plain interpreter with the ASan runtime preloaded. lavapipe is not instrumented
# but runs under ASan's allocator, which makes it slow: shallow malloc stacks, no
# quarantine to speak of, and a shorter fuzz run (LUMUS_FUZZ_CALLS) keep this in minutes.
ASAN_BUILD   := build-asan$(BUILD_SUFFIX)
ASAN_MODULE  := $(ASAN_BUILD)/lumus/core.so
ASAN_CFLAGS  := -O1 -g -fPIC -fsanitize=address,undefined -fno-omit-frame-pointer \
                -fno-sanitize-recover=undefined
ASAN_OBJ     := $(patsubst src/%.c,$(ASAN_BUILD)/obj/%.o,$(SRC))
SANITIZE_FUZZ_CALLS ?= 50000
# The fuzz spec's bound on one call (a hang detector, 10 s by default) doubled: under ASan
# lavapipe compiles a new pipeline in about 0.7 s, and an op written with other ops
# compiles up to ten of them at its first call (mish: 7.8 s on a 2-core machine).
SANITIZE_FUZZ_MAX_CALL_S ?= 20
# core.so is preloaded too so that it stays mapped (Lua unloads it at lua_close) and the
# leak report at exit can name its functions; so is lavapipe's driver, which the Vulkan
# loader unloads when a state that closes destroys its instance (its leaks would then be
# reported from an "<unknown module>" that no suppression can name).
LVP_DRIVER := $(shell sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1)
SANITIZE_ENV := LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $(CURDIR)/$(ASAN_MODULE) $(LVP_DRIVER)" \
  ASAN_OPTIONS=detect_leaks=1:malloc_context_size=8:quarantine_size_mb=16:detect_stack_use_after_return=0:abort_on_error=1 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/sanitize/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LUMUS_FUZZ_CALLS=$(SANITIZE_FUZZ_CALLS) LUMUS_FUZZ_MAX_CALL_S=$(SANITIZE_FUZZ_MAX_CALL_S)

$(ASAN_BUILD)/obj/%.o: src/%.c $(HDR) $(SHADER_INC) | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CFLAGS) $(VISIBILITY) $(WARN) $(JANSSON_CFLAGS) -I$(LUA_INCDIR) -Isrc -I$(SPV_DIR) -c $< -o $@

$(ASAN_MODULE): $(ASAN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAG) $(ASAN_CFLAGS) -o $@ $(ASAN_OBJ) $(LIBS)

# Ends with a count line like `make test`'s, prefixed "sanitize".
sanitize: $(ASAN_MODULE) examples
	@set -o pipefail; $(SANITIZE_ENV) $(SPEC_ENV) $(BUSTED) --lua=$(LUA) --cpath="$(ASAN_BUILD)/?.so" -o TAP 2>&1 \
	  | tee $(ASAN_BUILD)/test.tap; status=$$?; \
	  ok=$$(grep -c '^ok ' $(ASAN_BUILD)/test.tap); bad=$$(grep -c '^not ok ' $(ASAN_BUILD)/test.tap); \
	  echo "sanitize: $$ok passed, $$bad failed"; exit $$status

# ---- libFuzzer over the parsers of outside data (fuzz/parsers_fuzz.c), built with clang
# into build-fuzz/; new inputs go to build-fuzz/corpus, the seeds stay in fuzz/corpus.
# Then the Lua fuzz spec. FUZZ_SECONDS bounds the libFuzzer run.
FUZZ_CC      ?= clang
FUZZ_BUILD   := build-fuzz$(BUILD_SUFFIX)
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS  := -g -O1 -fPIC -fsanitize=address,undefined -fno-omit-frame-pointer \
                -fno-sanitize-recover=undefined
FUZZ_OBJ     := $(patsubst src/%.c,$(FUZZ_BUILD)/obj/%.o,$(SRC))
FUZZ_BIN     := $(FUZZ_BUILD)/parsers_fuzz
# The safetensors header parser alone (fuzz/safetensors_fuzz.c: no Lua, no device).
FUZZ_ST_BIN  := $(FUZZ_BUILD)/safetensors_fuzz
# Packages the checking targets need beyond DEB_PACKAGES: clang and its libFuzzer
# runtime for `make fuzz`, valgrind for `make valgrind` (gcc's ASan runtime comes with gcc).
CHECK_PACKAGES := clang libclang-rt-dev valgrind

# Checked like $(BUILD)/.deps, for what the target at hand needs (CHECK_NEED, set per
# target below); `make deps DEB_PACKAGES="$(CHECK_PACKAGES)"` installs them.
CHECK_NEED ?= $(CHECK_PACKAGES)
valgrind: CHECK_NEED := valgrind
fuzz fuzz-safetensors: CHECK_NEED := clang libclang-rt-dev
.PHONY: $(BUILD)/.check-deps
$(BUILD)/.check-deps:
	@missing=""; for p in $(CHECK_NEED); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make: missing Debian packages:$$missing (\`make deps DEB_PACKAGES=\"$(CHECK_PACKAGES)\"\` installs them, as root)" >&2; \
	  exit 1; \
	fi

$(FUZZ_BUILD)/obj/%.o: src/%.c $(HDR) $(SHADER_INC) | $(BUILD)/.check-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(WARN) $(JANSSON_CFLAGS) -I$(LUA_INCDIR) -Isrc -I$(SPV_DIR) -c $< -o $@

$(FUZZ_BIN): fuzz/parsers_fuzz.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(WARN) -I$(LUA_INCDIR) -Isrc -o $@ $< $(FUZZ_OBJ) $(LUA_LIB) $(LIBS) -lpthread

$(FUZZ_ST_BIN): fuzz/safetensors_fuzz.c src/safetensors.c src/safetensors.h | $(BUILD)/.check-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(WARN) $(JANSSON_CFLAGS) -Isrc -o $@ $< src/safetensors.c $(JANSSON_LIBS)

fuzz-safetensors: $(FUZZ_ST_BIN)
	@mkdir -p $(FUZZ_BUILD)/corpus_safetensors
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(FUZZ_ST_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=30 -rss_limit_mb=2048 \
	  -print_final_stats=1 $(FUZZ_BUILD)/corpus_safetensors fuzz/corpus_safetensors

fuzz: $(FUZZ_BIN) $(MODULE) fuzz-safetensors
	@mkdir -p $(FUZZ_BUILD)/corpus
	LSAN_OPTIONS=suppressions=$(CURDIR)/sanitize/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=30 -rss_limit_mb=4096 \
	  -print_final_stats=1 $(FUZZ_BUILD)/corpus fuzz/corpus
	$(SPEC_ENV) $(BUSTED) --lua=$(LUA) --cpath="$(BUILD)/?.so" spec/fuzz_spec.lua

install: $(MODULE) $(STATIC_LIB)
	mkdir -p $(INST_LIBDIR)/lumus $(INST_LUADIR)/lumus $(INST_INCDIR) $(INST_STATICDIR)
	cp $(MODULE) $(INST_LIBDIR)/lumus/core.so
	cp lua/lumus/*.lua $(INST_LUADIR)/lumus/
	mkdir -p $(INST_LUADIR)/lumus/models
	cp lua/lumus/models/*.lua $(INST_LUADIR)/lumus/models/
	cp src/lumus.h $(INST_INCDIR)/lumus.h
	cp $(STATIC_LIB) $(INST_STATICDIR)/liblumus.a

uninstall:
	rm -rf $(INST_LIBDIR)/lumus/core.so $(INST_LUADIR)/lumus $(INST_INCDIR)/lumus.h $(INST_STATICDIR)/liblumus.a

clean:
	rm -rf $(BUILD)/obj $(BUILD)/lumus $(SPV_DIR) $(BUILD)/embed $(STATIC_LIB) $(BUILD)/examples $(BUILD)/tests $(BUILD)/tsan $(ASAN_BUILD) $(FUZZ_BUILD)

# ---- Release. `make dist`: build/dist/lumus-<version>.tar.gz, a git archive of DIST_REF
# (HEAD: uncommitted changes are not in it; DIST_REF=$$(git stash create) takes them) under
# lumus-<version>/. `make rock`: that tarball and the versioned rockspec packed by
# `luarocks pack` into build/dist/lumus-<version>-1.src.rock. The version is the highest
# lumus-<version>-<revision>.rockspec's. luarocks pack fetches a file:// source from its
# own temporary directory, so it packs a copy of the rockspec that names the tarball by
# absolute path; the committed rockspec then replaces that copy inside the rock.
DIST_DIR      := $(BUILD)/dist
DIST_REF      ?= HEAD
ROCKSPEC       = $(lastword $(sort $(wildcard lumus-[0-9]*.rockspec)))
ROCK_VERSION   = $(patsubst lumus-%.rockspec,%,$(ROCKSPEC))
DIST_VERSION   = $(shell echo '$(ROCK_VERSION)' | sed 's/-[0-9]*$$//')
DIST_TARBALL   = $(DIST_DIR)/lumus-$(DIST_VERSION).tar.gz
LUAROCKS      ?= luarocks

.PHONY: dist rock
dist:
	@command -v git >/dev/null 2>&1 || { echo "make dist: git not found: install Debian's git" >&2; exit 1; }
	@[ -n "$(ROCKSPEC)" ] || { echo "make dist: no lumus-<version>-<revision>.rockspec here" >&2; exit 1; }
	@mkdir -p $(DIST_DIR)
	git archive --format=tar.gz --prefix=lumus-$(DIST_VERSION)/ -o $(DIST_TARBALL) $(DIST_REF)

rock: dist
	@for t in $(LUAROCKS) zip; do command -v $$t >/dev/null 2>&1 || \
	  { echo "make rock: $$t not found: install Debian's $$t" >&2; exit 1; }; done
	@mkdir -p $(DIST_DIR)/pack
	sed 's|^\( *url *= *\)"file://[^"]*"|\1"file://$(abspath $(DIST_TARBALL))"|' $(ROCKSPEC) > $(DIST_DIR)/pack/$(ROCKSPEC)
	cd $(DIST_DIR) && $(LUAROCKS) pack pack/$(ROCKSPEC)
	cp $(ROCKSPEC) $(DIST_DIR)/ && cd $(DIST_DIR) && zip -q lumus-$(ROCK_VERSION).src.rock $(ROCKSPEC)
	@echo "make rock: $(DIST_DIR)/lumus-$(ROCK_VERSION).src.rock"
