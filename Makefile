# hjit: the two commands of the README.
#   make demo   installs what is missing, builds, tunes two workloads briefly, and runs hjit-bench
#               (the workloads table, with tuned rows)
#   make test   installs what is missing, builds, and runs the test suite (CI runs this)
BUILD ?= build
JOBS ?= $(shell nproc)
# Debian packages the build needs; OpenBLAS is hjit-bench's W3 reference; oneDNN the extern sgemm
# stage tuning runs may choose (optional: without it, OpenBLAS; without both, none). pocl is an
# OpenCL driver for the CPU: the test suite runs the GPU schedules' kernels on it (OpenCL-O1).
PACKAGES := cmake ninja-build g++ pkg-config ccache libhalide14-0-dev libspdlog-dev doctest-dev libopenblas-dev libsqlite3-dev libdnnl-dev pocl-opencl-icd

.PHONY: all deps configure build demo test bench examples device-bundle clean

all: build

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

# The CUDA device bundle: every differential group exported for CUDA with its eager results, and a
# runner that needs no Halide: carry $(BUILD)/device_bundle_cuda to a machine with a GPU and run
# ./runner there (./runner --repeat 50 adds timings).
device-bundle: build
	cd $(BUILD)/tests && HJIT_TEST_CONFIG=CUDA-O1 HJIT_DEVICE_BUNDLE=$(abspath $(BUILD))/device_bundle_cuda ./test_differential

examples: build
	$(BUILD)/examples/quickstart
	$(BUILD)/examples/mlp_forward

clean:
	rm -rf $(BUILD)
