# hjit: the two commands of the README.
#   make demo   installs what is missing, builds, tunes two workloads briefly, and runs hjit-bench
#               (the workloads table, with tuned rows)
#   make test   installs what is missing, builds, and runs the test suite (CI runs this)
#   make test-full  the same with every case of every differential configuration (make test runs
#               every case at O1, every fourth in CUDA's and every other in the other configurations)
BUILD ?= build
JOBS ?= $(shell nproc)
# Debian packages the build needs; oneDNN is hjit-bench's W3 reference and the extern sgemm stage
# tuning runs may choose (optional: without it, OpenBLAS; without both, none). pocl is an
# OpenCL driver for the CPU: the test suite runs the GPU schedules' kernels on it (OpenCL-O1).
# libonnx-dev and libprotobuf-dev: ONNX's own reader, checker and shape inference (hjit::onnx);
# libonnx-testdata: ONNX's conformance suite, which the test suite runs.
# zlib1g-dev: numpy's .npz archives (zip files, deflated by savez_compressed).
PACKAGES := cmake ninja-build g++ pkg-config ccache libhalide14-0-dev libspdlog-dev doctest-dev libopenblas-dev libsqlite3-dev sqlite3 libdnnl-dev pocl-opencl-icd \
  libonnx-dev libprotobuf-dev libonnx-testdata zlib1g-dev libopenmpi-dev openmpi-bin \
  libhiredis-dev libssl-dev redis-server

.PHONY: all deps configure build demo test test-full settings-doc sanitize sanitize-ci sanitize-thread soak bench examples device-bundle clean

all: build

# docs/settings.md's table from the declaration of the settings (support/settings_list.h).
settings-doc: build
	@TABLE="$$($(BUILD)/tools/hjit-onnx --settings --markdown)" awk \
	  '/^<!-- end of the settings table -->/ { skip = 0 } !skip { print } /^<!-- settings table:/ { print ENVIRON["TABLE"]; skip = 1 }' \
	  docs/settings.md > docs/settings.md.new && mv docs/settings.md.new docs/settings.md

deps:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "hjit: installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  $$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing; \
	fi

configure: deps
	@if [ ! -f $(BUILD)/build.ninja ]; then cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release; fi

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# make demo tunes two workloads briefly (the database persists: a second make demo goes on where the
# first stopped) and shows them as the "tuned" rows of the table.
DEMO_DB ?= $(BUILD)/demo-tuning.sqlite
demo: build
	$(BUILD)/tools/hjit-tune --workload W3,W4 --minutes 0.25 --db $(DEMO_DB) --quiet
	$(BUILD)/bench/hjit-bench --quick --db $(DEMO_DB)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-full: build
	HJIT_TEST_FULL=1 ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The test suite built with AddressSanitizer and UndefinedBehaviorSanitizer (any report fails its
# test; LeakSanitizer too) in a build directory of its own: every configuration, about 40 minutes
# on 2 cores. The tests' pipeline cache is emptied first: a run that found its pipelines on disk
# would check loading them, not compiling them. Halide compiles on the calling thread's stack in
# such a build (halide_backend/build/build.cpp), so threads get 64 MiB. Such a build has no OpenCL (pocl
# is loaded with RTLD_DEEPBIND, which AddressSanitizer does not support): the OpenCL-device
# configuration and test_device report themselves skipped.
# Left out: test_tune (which candidate a tuning run keeps rests on measured times, and the
# instrumented harness measures differently), install_consumer and docs_examples (applications built
# without the sanitizer cannot load a sanitized libhjit). Allocations too big to make return null (as
# malloc does): test_errors checks they are errors. SANITIZE_SKIP= runs all.
SANITIZE_BUILD ?= build-sanitize
SANITIZE_SKIP ?= test_tune|install_consumer|docs_examples
# A sanitized build's `all` leaves out the tests sanitize-ci skips (tests/CMakeLists.txt): make
# sanitize builds them too.
SANITIZE_TARGETS ?= all test_differential test_torch_golden test_onnx_conformance test_tune
SANITIZE_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
sanitize: deps
	@if [ ! -f $(SANITIZE_BUILD)/build.ninja ]; then cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DHJIT_SANITIZE=address,undefined -DHJIT_BUILD_EXAMPLES=ON; fi
	cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target $(SANITIZE_TARGETS)
	rm -rf $(SANITIZE_BUILD)/test-cache
	ulimit -s 65536 2>/dev/null || true; $(SANITIZE_ENV) ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j $(JOBS) -E '$(SANITIZE_SKIP)'

# What CI runs after make test (.ci/run): make sanitize without the differential, golden and ONNX
# conformance tests (the whole op set in every configuration, most of make sanitize's time): every other
# test, the soak smoke included, and 300 mutations of each fuzzed format instead of 10,000
# (test_fuzz took 27 minutes instrumented, most of it Halide lowering mutated schedules).
sanitize-ci:
	HJIT_FUZZ_MUTATIONS=300 $(MAKE) sanitize SANITIZE_SKIP='$(SANITIZE_SKIP)|differential|torch_golden|onnx_conformance' SANITIZE_TARGETS=all

# ThreadSanitizer on the tests that call hjit from several threads at once. HJIT_THREADS=1: loops
# run on their callers' threads (compiled code is not instrumented, so TSan would not see what a
# pool worker's iteration wrote); the threads under test are the callers' own. test_threads tests
# the pool itself.
TSAN_BUILD ?= build-tsan
sanitize-thread: deps
	@if [ ! -f $(TSAN_BUILD)/build.ninja ]; then cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DHJIT_SANITIZE=thread; fi
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_jit test_cache test_module test_threads cache_worker
	ulimit -s 65536 2>/dev/null || true; TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/tsan.supp)" HJIT_THREADS=1 \
	  ctest --test-dir $(TSAN_BUILD) --output-on-failure -R '^(test_jit|test_cache|test_module|test_threads)$$'

# Ten minutes of mixed calls from three threads, every result checked against eager, resident
# memory flat after the warm-up (tools/hjit_soak.cpp). Not part of make test (the suite runs a
# 10-second smoke of it).
SOAK_MINUTES ?= 10
soak: build
	$(BUILD)/tools/hjit-soak --minutes $(SOAK_MINUTES) --threads 3

# The CUDA device bundle: every differential group exported for CUDA with its eager results, and a
# runner that needs no Halide: carry $(BUILD)/device_bundle_cuda_carry (the runner, stripped, and
# the cases' data: the libraries, headers and PTX it was built from stay here, about 90 MB) to a
# machine with a GPU and run ./runner there (./runner --repeat 50 adds timings).
# DEVICE_BUNDLE_FULL= exports make test's sample of the cases instead of all of them (27 MB to carry).
DEVICE_BUNDLE_FULL ?= 1
device-bundle: build
	rm -rf $(BUILD)/device_bundle_cuda $(BUILD)/device_bundle_cuda_carry
	cd $(BUILD)/tests && $(if $(DEVICE_BUNDLE_FULL),HJIT_TEST_FULL=1,) HJIT_TEST_CONFIG=CUDA-O1 HJIT_DEVICE_BUNDLE=$(abspath $(BUILD))/device_bundle_cuda ./test_differential
	cp -r $(BUILD)/device_bundle_cuda $(BUILD)/device_bundle_cuda_carry
	find $(BUILD)/device_bundle_cuda_carry \( -name '*.a' -o -name '*.h' -o -name '*.ptx' \) -delete
	strip $(BUILD)/device_bundle_cuda_carry/runner
	du -sh $(BUILD)/device_bundle_cuda_carry

examples: build
	$(BUILD)/examples/quickstart
	$(BUILD)/examples/mlp_forward

clean:
	rm -rf $(BUILD)
