# runfn: `make run` runs the pipeline on the built-in demo, `make test` runs every test.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --no-builtin-rules

CARGO ?= cargo

# libtorch is installed once into a cache folder outside the clone, keyed by version, and the
# build finds it through LIBTORCH; the binaries carry an rpath to its lib folder.
ifeq ($(filter clean,$(MAKECMDGOALS)),)
LIBTORCH ?= $(shell scripts/setup-libtorch.sh)
ifeq ($(strip $(LIBTORCH)),)
$(error libtorch is not available; scripts/setup-libtorch.sh said why above)
endif
export LIBTORCH
endif
BIN := target/debug
RUN_DIR := runs/demo
DEMO_MANIFEST := testdata/demo/manifest.yaml

.PHONY: all build test lint bench run golden clean

all: build

build:
	$(CARGO) build --workspace --bins --quiet

## Every test: unit tests of each crate and the integration tests that run the real binaries.
test: build
	$(CARGO) test --workspace --quiet

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --quiet -- -D warnings

## Benchmarks against the named peers; results as JSON under bench/. Never part of `make test`.
bench:
	scripts/bench-mf-hash.sh
	scripts/bench-data.sh
	scripts/bench-train.sh

## The pipeline on the built-in demo: one record per stage under runs/demo/, each stage reading
## the previous stage's record. Stages depend on the binaries as files, so a second `make run`
## with nothing changed does nothing.
run: build
	@$(MAKE) --no-print-directory stages
	@echo "run: records under $(RUN_DIR)/ (the last one: $(RUN_DIR)/evaluate.json)"

.PHONY: stages
stages: $(RUN_DIR)/evaluate.json

# The snapshot the demo manifest names (./runs/demo/snapshot), generated deterministically.
$(RUN_DIR)/snapshot.json: $(BIN)/demo-data
	@mkdir -p $(@D)
	$(BIN)/demo-data --out $(RUN_DIR)/snapshot --rows 200000 --seed 7 -q > $@

$(RUN_DIR)/manifest.json: $(DEMO_MANIFEST) $(RUN_DIR)/snapshot.json $(BIN)/mf-hash
	$(BIN)/mf-hash $(DEMO_MANIFEST) --data-digest $(RUN_DIR)/snapshot > $@

$(RUN_DIR)/validate.json: $(RUN_DIR)/manifest.json $(BIN)/ds-validate
	$(BIN)/ds-validate --profile-out $(RUN_DIR)/profile.json < $< > $@

$(RUN_DIR)/leaks.json: $(RUN_DIR)/validate.json $(BIN)/leak-check
	$(BIN)/leak-check < $< > $@

$(RUN_DIR)/shards.json: $(RUN_DIR)/leaks.json $(BIN)/shardify
	$(BIN)/shardify --out $(RUN_DIR)/shards < $< > $@

$(RUN_DIR)/ckpt.json: $(RUN_DIR)/shards.json $(BIN)/ckpt-interval
	$(BIN)/ckpt-interval --cost 90 --mtbf 43200 --restart 120 < $< > $@

# Killed halfway, a rerun resumes from the newest checkpoint under train-seed7/checkpoints.
$(RUN_DIR)/train.json: $(RUN_DIR)/ckpt.json $(BIN)/train
	$(BIN)/train --out $(RUN_DIR)/train-seed7 < $< > $@

$(RUN_DIR)/evaluate.json: $(RUN_DIR)/train.json $(BIN)/evaluate
	$(BIN)/evaluate --bootstrap 200 < $< > $@

## Rewrite the golden files under testdata/ from the current tools; review the diff.
golden:
	scripts/regen-golden.sh

clean:
	rm -rf runs
