# runfn: `make run` runs the pipeline on the built-in demo, `make test` runs every test.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --no-builtin-rules

CARGO ?= cargo
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

## The pipeline on the demo manifest, one file per stage under runs/demo/.
## Stages depend on the binaries as files, so an unchanged build and manifest redo nothing.
run: build
	@$(MAKE) --no-print-directory stages
	@echo "run: records under $(RUN_DIR)/"

.PHONY: stages
stages: $(RUN_DIR)/ckpt.json

$(RUN_DIR)/manifest.json: $(DEMO_MANIFEST) $(BIN)/mf-hash
	@mkdir -p $(@D)
	$(BIN)/mf-hash $(DEMO_MANIFEST) > $@

$(RUN_DIR)/ckpt.json: $(RUN_DIR)/manifest.json $(BIN)/ckpt-interval
	$(BIN)/ckpt-interval --cost 90 --mtbf 43200 --restart 120 < $< > $@

## Rewrite the golden files under testdata/ from the current tools; review the diff.
golden:
	scripts/regen-golden.sh

clean:
	rm -rf runs
