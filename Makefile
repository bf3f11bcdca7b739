# lathe — build, test and install targets. `make` builds build/lathe; `make test` runs every CPU test
# under AddressSanitizer and UBSan; `make deps` installs the Debian packages the build needs.
CC      ?= cc
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wno-missing-field-initializers
CUDA    ?= /usr/local/cuda
CFLAGS  ?= -O2 -g
LDLIBS  := -ldl -lm -lpthread

LIB_SRC := $(sort $(wildcard src/*/*.c))
LIB_SRC := $(filter-out src/cli/%,$(LIB_SRC))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))

# Release build
OBJ     := $(patsubst src/%.c,build/obj/%.o,$(LIB_SRC))
CLI_OBJ := $(patsubst src/%.c,build/obj/%.o,$(CLI_SRC))
# Sanitized build for tests
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_OBJ  := $(patsubst src/%.c,build/asan/%.o,$(LIB_SRC))
SAN_CLI  := $(patsubst src/%.c,build/asan/%.o,$(CLI_SRC))
TEST_BIN := $(patsubst tests/%.c,build/tests/%,$(TEST_SRC))

.PHONY: all test test-unit test-gpu deps clean format
all: build/lathe

build/lathe: $(OBJ) $(CLI_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) -MMD -MP -c $< -o $@

build/asan/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -MMD -MP -c $< -o $@

build/asan/lathe: $(SAN_OBJ) $(SAN_CLI)
	$(CC) $(SAN) -o $@ $^ $(LDLIBS)

build/tests/%: tests/%.c $(SAN_OBJ) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g $(SAN) -Isrc -o $@ $< $(SAN_OBJ) -lcmocka $(LDLIBS)

# Every CPU test: unit tests, differential tests against the float64 reference (CPU backend,
# CUDA C through NVRTC), CLI and bad-input tests. Ends with "N passed, M failed".
test: $(TEST_BIN) build/asan/lathe build/lathe
	@LATHE_CACHE_DIR=$(CURDIR)/build/test-cache scripts/run-tests.sh $(TEST_BIN)

# GPU tests (run on a machine with an NVIDIA GPU).
test-gpu: build/lathe
	@scripts/run-gpu-tests.sh

deps:
	scripts/install-deps.sh

format:
	clang-format -i src/*/*.c src/*/*.h tests/*.c tests/*.h

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SAN_OBJ:.o=.d) $(SAN_CLI:.o=.d)
