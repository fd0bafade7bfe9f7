# l7fast: the entry points users, packagers and CI use. The C/C++/BPF build
# itself is CMake (build/); this file installs dependencies and runs things.
#
#   make deps      install build + run + test dependencies (Debian 12, apt)
#   make           build everything into build/
#   make demo      deps + build + run l7fastd on the embedded default policy
#   make test      deps + build + the whole test suite (what .ci/run runs)
#   make fuzz      libFuzzer targets, 30 s each (L7FAST_FUZZ_SECONDS=...)
#   make fuzz-long libFuzzer targets, 10 min each
#   make bench     benchmark against direct, HAProxy and nginx (short mode)
#   make install   DESTDIR=... PREFIX=/usr
#   make deb / make rpm

PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build deps demo test test-unit test-e2e test-kmod test-system fuzz fuzz-long bench bench-full \
	install man deb rpm clean

all: build

# a failed configure (say, before `make deps`) leaves a cache behind: remove
# it, or the next `make` would take the tree as configured
$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) || \
		{ rm -f $(BUILD)/CMakeCache.txt; exit 1; }

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

deps:
	scripts/install-deps.sh

demo: deps build
	scripts/demo.sh

test: deps build
	scripts/run-tests.sh

test-unit: build
	cd $(BUILD) && ctest --output-on-failure

test-e2e: build
	scripts/run-tests.sh e2e

test-kmod: build
	L7F_KERNEL_TESTS=$(abspath $(BUILD))/tests/l7fast_kernel_tests scripts/kmod/run-matrix.sh

test-system: build
	scripts/run-tests.sh system

fuzz: deps
	BUILD=$(BUILD) scripts/fuzz.sh

fuzz-long: deps
	BUILD=$(BUILD) scripts/fuzz.sh --long

bench: deps build
	scripts/bench/run.sh --short

bench-full: deps build
	scripts/bench/run.sh --full

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

man:
	scripts/man.sh

deb:
	packaging/build-deb.sh

rpm:
	packaging/build-rpm.sh

clean:
	rm -rf $(BUILD)
