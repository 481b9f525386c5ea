# Two entry points (see README): `make serve` and `make test`. Everything else is a helper.
MODEL ?=
PORT ?= 8080
JOBS ?= $(shell nproc)
RELEASE_DIR := build/release
TEST_DIR := build/test
FUZZ_DIR := build/fuzz
DEMO_DIR := build/demo-model
TOKENIZER_DIR := third_party/qwen3-tokenizer
CUDA ?= AUTO
# CI and `make test` build one CUDA arch (when nvcc exists); release builds ship all of them.
TEST_CUDA_ARCHS ?= 90a
RELEASE_CUDA_ARCHS ?= 80;86;89;90a;120
FUZZ_SECONDS ?= 20
# The sanitizer test build keeps line tables only (-g1 instead of RelWithDebInfo's -g): ASan and
# UBSan reports keep every file:line and inlined frame, while compiles take about a quarter less CPU
# and objects are ~2.4x smaller (GCC 12; measured in the commit that set this).
# It compiles at -O1 (the level ASan's documentation suggests): each TU takes ~45% less CPU than at
# -O2. The CPU backend's kernels, where the tests spend their time, keep -O2 (TEST_KERNEL_FLAGS).
# docs/testing.md has the figures.
TEST_OPT_FLAGS ?= -O1 -g1 -DNDEBUG
TEST_KERNEL_FLAGS ?= -O2
# The sanitized test build compiles with clang (as the fuzz build does): with ASan + UBSan at -O1 a
# TU takes about a third less CPU than with GCC 12 (docs/testing.md).
# `make build` / `make serve` keep the system's c++ (GCC, without -Werror), which every development
# and GPU-machine build also uses.
TEST_CC ?= clang
TEST_CXX ?= clang++

.PHONY: serve test deps tokenizer build build-test demo fuzz clean format

deps:
	@tools/setup/install-deps.sh

tokenizer: deps
	@tools/setup/fetch-tokenizer.sh

build: deps
	cmake -S . -B $(RELEASE_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSYV_CUDA=$(CUDA) \
	  "-DSYV_CUDA_ARCHS=$(RELEASE_CUDA_ARCHS)" -DSYV_TESTS=OFF -DSYV_BENCHMARKS=OFF
	cmake --build $(RELEASE_DIR) -j $(JOBS) --target syv

# The demo model: tiny random weights with the real Qwen3 vocabulary and tokenizer.
demo: build tokenizer
	@test -f $(DEMO_DIR)/config.json || $(RELEASE_DIR)/syv demo-model --tokenizer $(TOKENIZER_DIR) --out $(DEMO_DIR)

serve: build tokenizer demo
	@tools/setup/serve.sh "$(RELEASE_DIR)/syv" "$(if $(MODEL),$(MODEL),$(DEMO_DIR))" "$(PORT)"

# The tests also need chromium (the chat page's browser test) and the npm packages of the e2e tests.
build-test: deps tokenizer
	@tools/setup/install-deps.sh --test
	@# A build folder configured with another compiler: CMake would re-run with the new compiler but
	@# drop every other -D below (no sanitizers, no -Werror), so start it afresh.
	@if [ -f $(TEST_DIR)/CMakeCache.txt ] && ! sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' $(TEST_DIR)/CMakeCache.txt | \
	    grep -Fqx -e '$(TEST_CXX)' -e "$$(command -v $(TEST_CXX))"; then \
	  echo "$(TEST_DIR) was configured with another compiler: removing it"; rm -rf $(TEST_DIR); fi
	cmake -S . -B $(TEST_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSYV_CUDA=$(CUDA) \
	  -DCMAKE_C_COMPILER=$(TEST_CC) -DCMAKE_CXX_COMPILER=$(TEST_CXX) \
	  "-DSYV_CUDA_ARCHS=$(TEST_CUDA_ARCHS)" -DSYV_WERROR=ON -DSYV_SANITIZE=ON \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(TEST_OPT_FLAGS)" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$(TEST_OPT_FLAGS)" \
	  "-DSYV_CPU_KERNEL_FLAGS=$(TEST_KERNEL_FLAGS)"
	cmake --build $(TEST_DIR) -j $(JOBS)
	cd tests/e2e/openai_client && npm ci --silent --no-audit --no-fund
	cd tests/e2e/langchain_client && npm ci --silent --no-audit --no-fund
	cd tests/e2e/ai_sdk_client && npm ci --silent --no-audit --no-fund
	cd tests/e2e/qwen_code_client && npm ci --silent --no-audit --no-fund
	cd tests/e2e/webui_browser && npm ci --silent --no-audit --no-fund

fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSYV_CUDA=OFF -DSYV_FUZZ=ON -DSYV_TESTS=OFF -DSYV_BENCHMARKS=OFF \
	  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined" \
	  "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link,address,undefined"
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_targets
	tools/setup/run-fuzzers.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

test: build-test
	cd $(TEST_DIR) && ctest -j $(JOBS) --output-on-failure --timeout 600
	$(MAKE) fuzz

format:
	clang-format -i $$(git ls-files 'src/*.h' 'src/*.cpp' 'src/*.cu' 'src/*.cuh' 'tests/*.cpp' 'tests/*.h')

clean:
	rm -rf build
