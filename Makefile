# tg — build, test, install.  `make` builds the library, tg.pc, the tests and the examples;
# `make bench` builds the benchmarks (two link OpenBLAS: libopenblas-dev); `make test` runs the
# test suite, `make test-sanitize` runs it under ASan+UBSan. Objects depend on the headers they
# include (-MMD: the test fixtures too).
CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
OPT     ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC $(OPT) -Iinclude -Isrc
LDLIBS  += -lz -lm -ldl -lpthread -lprotobuf-c

SRCS    := $(sort $(wildcard src/*/*.c))
# The ONNX loader's protobuf-c code is generated at build time from Debian's onnx.proto
# (libonnx-dev, protobuf-c-compiler; docs/onnx.md) into $(BUILD)/gen, never committed.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
ONNX_GEN   := $(BUILD)/gen/onnx/onnx.pb-c
# Sequences and optionals (SequenceProto, OptionalProto) are in onnx-data.proto, which Debian does
# not install: src/onnx/proto/onnx/onnx-data.proto is ONNX's own file, importing onnx.proto.
ONNX_DATA_PROTO := src/onnx/proto/onnx/onnx-data.proto
ONNX_DATA_GEN   := $(BUILD)/gen/onnx/onnx-data.pb-c
OBJS    := $(SRCS:%.c=$(BUILD)/%.o) $(ONNX_GEN).o $(ONNX_DATA_GEN).o
TESTS   := $(sort $(wildcard tests/*.c))
TOBJS   := $(TESTS:%.c=$(BUILD)/%.o)
BENCHES := $(patsubst bench/%.c,$(BUILD)/bench_%,$(wildcard bench/*.c))
EXAMPLES:= $(patsubst examples/%.c,$(BUILD)/example_%,$(wildcard examples/*.c))
HEADERS := $(wildcard include/*.h)

# The sources, written down when they change (a file added or removed), so the library and the
# test binary are relinked: a deleted test file must leave test_tg.
SOURCES := $(BUILD)/sources.list
$(shell mkdir -p $(BUILD) && echo '$(SRCS) $(TESTS)' | cmp -s - $(SOURCES) || echo '$(SRCS) $(TESTS)' > $(SOURCES))

all: $(BUILD)/libtg.a $(BUILD)/libtg.so $(BUILD)/tg.pc $(BUILD)/test_tg $(EXAMPLES)

bench: $(BENCHES)

$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(OBJS:.o=.d) $(TOBJS:.o=.d)

$(ONNX_GEN).c $(ONNX_GEN).h: $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen/onnx
	protoc-c --c_out=$(BUILD)/gen --proto_path=$(dir $(ONNX_PROTO)).. onnx/$(notdir $(ONNX_PROTO))
$(ONNX_DATA_GEN).c $(ONNX_DATA_GEN).h: $(ONNX_DATA_PROTO) $(ONNX_GEN).h
	protoc-c --c_out=$(BUILD)/gen --proto_path=src/onnx/proto --proto_path=$(dir $(ONNX_PROTO)).. onnx/onnx-data.proto
$(ONNX_GEN).o $(ONNX_DATA_GEN).o: $(BUILD)/gen/onnx/%.o: $(BUILD)/gen/onnx/%.c
	$(CC) $(CFLAGS) -I$(BUILD)/gen -c $< -o $@
$(BUILD)/src/onnx/%.o: CFLAGS += -I$(BUILD)/gen
$(filter $(BUILD)/src/onnx/%,$(OBJS)): | $(ONNX_GEN).h $(ONNX_DATA_GEN).h

# The ONNX conformance runner (docs/onnx.md): its own program over libonnx-testdata.
$(BUILD)/onnx_conformance: tests/onnx/conformance.c $(HEADERS) $(BUILD)/libtg.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtg.a $(LDFLAGS) $(LDLIBS)

onnx-conformance: $(BUILD)/onnx_conformance
	./$(BUILD)/onnx_conformance $(ONNX_ARGS)

$(BUILD)/libtg.a: $(OBJS) $(SOURCES)
	@rm -f $@
	ar rcs $@ $(OBJS)

$(BUILD)/libtg.so: $(OBJS) $(SOURCES)
	$(CC) -shared -o $@ $(OBJS) $(LDFLAGS) $(LDLIBS)

# libdir is the build directory in-tree and PREFIX/lib once installed. Libs carry an rpath to
# it: pkg-config's -ltg links libtg.so (even with --static), and the program must start
# without LD_LIBRARY_PATH or ldconfig.
$(BUILD)/tg.pc: Makefile
	@mkdir -p $(BUILD)
	@printf 'prefix=%s\nincludedir=$${prefix}/include\nlibdir=%s\n\nName: tg\nDescription: lazy tensors and a kernel compiler in C\nVersion: 0.1.0\nCflags: -I$${includedir}\nLibs: -L$${libdir} -Wl,-rpath,$${libdir} -ltg\nLibs.private: -lz -lm -ldl -lpthread -lprotobuf-c\n' \
	  "$(if $(INSTALLING),$(PREFIX),$(abspath .))" '$(if $(INSTALLING),$${prefix}/lib,$(abspath $(BUILD)))' > $@

$(BUILD)/test_tg: $(TOBJS) $(BUILD)/libtg.a $(SOURCES)
	$(CC) $(CFLAGS) -o $@ $(TOBJS) $(BUILD)/libtg.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench_%: bench/%.c $(wildcard bench/*.h) $(HEADERS) $(BUILD)/libtg.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtg.a $(LDFLAGS) $(LDLIBS) $(BENCH_LIBS)
$(BUILD)/bench_matmul $(BUILD)/bench_kernels: BENCH_LIBS = -lopenblas

$(BUILD)/example_%: examples/%.c $(HEADERS) $(BUILD)/libtg.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtg.a $(LDFLAGS) $(LDLIBS)

# The runner runs test areas in parallel (TG_TEST_JOBS or JOBS, default: the cores).
test: $(BUILD)/test_tg $(BUILD)/libtg.so $(BUILD)/tg.pc
	SPEC=1 ./$(BUILD)/test_tg $(FILTER)

# Sanitized build in its own directory; kernels are compiled with the same flags.
# intercept_tls_get_addr=0: GCC's (up to 13) __tls_get_addr interceptor can mistake a thread's
# dynamic TLS block for a pre-2.25 glibc one, and LeakSanitizer's tracer then dies at exit
# ("Tracer caught signal 11", no leak); libtg's TLS is static TLS, which LSan scans anyway.
SAN_ENV  := ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 SPEC=1
SANBUILD ?= build-san
test-sanitize:
	$(MAKE) BUILD=$(SANBUILD) OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LDFLAGS="-fsanitize=address,undefined" $(SANBUILD)/test_tg $(SANBUILD)/libtg.so $(SANBUILD)/tg.pc
	$(SAN_ENV) ./$(SANBUILD)/test_tg $(FILTER)

# The thread tests (tests/test_threads.c, docs/threads.md) under ThreadSanitizer: any report fails.
TSANBUILD ?= build-tsan
test-tsan:
	$(MAKE) BUILD=$(TSANBUILD) OPT="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" LDFLAGS="-fsanitize=thread" \
	  $(TSANBUILD)/test_tg
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" SPEC=1 ./$(TSANBUILD)/test_tg thread

install: $(BUILD)/libtg.a $(BUILD)/libtg.so
	$(MAKE) INSTALLING=1 -B $(BUILD)/tg.pc
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m644 include/tg.h include/tg_nn.h include/tg_onnx.h include/tg_llm.h $(DESTDIR)$(PREFIX)/include/
	install -m644 $(BUILD)/libtg.a $(DESTDIR)$(PREFIX)/lib/
	install -m755 $(BUILD)/libtg.so $(DESTDIR)$(PREFIX)/lib/
	install -m644 $(BUILD)/tg.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	$(MAKE) -B $(BUILD)/tg.pc

clean:
	rm -rf build build-san build-*

.PHONY: all bench test test-sanitize test-tsan install clean onnx-conformance

# ---------------------------------------------------------------- fuzzing (docs/errors.md)
# `make fuzz` builds the random-call API fuzzer against the ASan+UBSan library of
# test-sanitize ($(SANBUILD)/api_fuzz) and one libFuzzer target per file loader, built with
# clang against a library of their own ($(FUZZBUILD)/fuzz_*; needs clang and
# libclang-rt-14-dev). `make fuzz-check` is the bounded run CI makes (a minute or two): the
# API fuzzer over FUZZ_SEEDS seeds of FUZZ_CALLS calls with leak detection, then each loader
# target over its seed corpus (tests/fuzz/corpus/NAME) plus FUZZ_RUNS mutated inputs.
FUZZBUILD   ?= build-fuzz
FUZZ_CC     ?= clang
FUZZ_SEED   ?= 1
FUZZ_SEEDS  ?= 6
FUZZ_CALLS  ?= 1500
FUZZ_SECONDS?= 150
FUZZ_RUNS   ?= 20000
FUZZ_SANOPT := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_API    := tests/fuzz/api_fuzz.c tests/fuzz/api_hostile.c tests/fuzz/api_ref.c
FUZZ_NAMES  := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_ENV    := ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 SPEC=1

fuzz:
	$(MAKE) BUILD=$(SANBUILD) OPT="$(FUZZ_SANOPT)" LDFLAGS="-fsanitize=address,undefined" $(SANBUILD)/api_fuzz
	$(MAKE) BUILD=$(FUZZBUILD) CC=$(FUZZ_CC) OPT="$(FUZZ_SANOPT) -fsanitize=fuzzer-no-link" \
	  $(FUZZ_NAMES:%=$(FUZZBUILD)/fuzz_%)

$(BUILD)/api_fuzz: $(FUZZ_API) tests/fuzz/fuzz.h $(HEADERS) $(BUILD)/libtg.a
	$(CC) $(CFLAGS) -o $@ $(FUZZ_API) $(BUILD)/libtg.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_file.h $(HEADERS) $(BUILD)/libtg.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libtg.a $(LDLIBS)

fuzz-check: fuzz
	$(FUZZ_ENV) ./$(SANBUILD)/api_fuzz --seed $(FUZZ_SEED) --seeds $(FUZZ_SEEDS) --calls $(FUZZ_CALLS) --seconds $(FUZZ_SECONDS)
	@for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZBUILD)/corpus-$$n; log=$(FUZZBUILD)/fuzz_$$n.log; \
	  $(FUZZ_ENV) ./$(FUZZBUILD)/fuzz_$$n -runs=$(FUZZ_RUNS) -max_total_time=30 -max_len=4096 \
	    -artifact_prefix=$(FUZZBUILD)/ $(FUZZBUILD)/corpus-$$n tests/fuzz/corpus/$$n > $$log 2>&1; rc=$$?; \
	  if [ $$rc -ne 0 ]; then tail -60 $$log; echo "fuzz_$$n: FAILED (the input is in $(FUZZBUILD)/crash-*)"; exit 1; fi; \
	  echo "fuzz_$$n: $$(ls tests/fuzz/corpus/$$n | wc -l) seed inputs; $$(tail -1 $$log)"; \
	done

.PHONY: fuzz fuzz-check
