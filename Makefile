# runfn: `make run` runs the pipeline on the built-in demo, `make test` runs every test.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
# Every stage's record is kept (pattern-rule outputs would otherwise be removed as intermediates).
.SECONDARY:
MAKEFLAGS += --no-builtin-rules

CARGO ?= cargo

# The clone's root, so the stages also run from another folder (make -f ROOT/Makefile stages).
ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

# libtorch is installed once into a cache folder outside the clone, keyed by version, and the
# build finds it through LIBTORCH; the binaries carry an rpath to its lib folder.
ifeq ($(filter clean,$(MAKECMDGOALS)),)
LIBTORCH ?= $(shell $(ROOT)/scripts/setup-libtorch.sh)
ifeq ($(strip $(LIBTORCH)),)
$(error libtorch is not available; scripts/setup-libtorch.sh said why above)
endif
export LIBTORCH
endif
BIN := $(ROOT)/target/debug

# The run: its manifest, the snapshot size, the model's name in the registry, the training seeds
# (the first is the candidate; all of them measure the noise floor) and the registry.
MANIFEST ?= $(ROOT)/testdata/demo/manifest.yaml
RUN_DIR ?= runs/demo
ROWS ?= 200000
MODEL ?= churn
SEEDS ?= 7 8 9
REGISTRY ?= registry
export RUNFN_REGISTRY := $(REGISTRY)

.PHONY: all build test lint bench run retrain golden clean

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
	scripts/bench-ddp.sh

## The pipeline on the built-in demo: one record per stage under runs/demo/, each stage reading
## the previous stage's record, ending with a registered model. Stages depend on their inputs and
## on the binaries as files, so a second `make run` with nothing changed does nothing, and a
## changed manifest retrains. A failing stage stops the run and its output is deleted.
run: build
	@$(MAKE) --no-print-directory stages
	@echo "run: done; $(MODEL)@prod is version $$($(BIN)/register resolve $(MODEL)@prod | grep -o '"version":[0-9]*' | cut -d: -f2); records under $(RUN_DIR)/"

## Retraining from cron: one run at a time (a lock), appended to runs/retrain.log, non-zero
## when a stage fails.
retrain:
	@$(ROOT)/scripts/retrain.sh $(RETRAIN_ARGS)

.PHONY: stages
stages: $(RUN_DIR)/register.json

CANDIDATE := $(firstword $(SEEDS))
say = @printf 'run: %s\n' $(1) >&2

# The snapshot the demo manifest names (./runs/demo/snapshot), generated deterministically.
$(RUN_DIR)/snapshot.json: $(BIN)/demo-data
	@mkdir -p $(@D)
	$(call say,"generating the snapshot ($(ROWS) rows)")
	$(BIN)/demo-data --out $(RUN_DIR)/snapshot --rows $(ROWS) --seed 7 -q > $@

# The manifest's path and content, rewritten only when they change: another MANIFEST, or an
# edited one, reruns everything after it; the same one leaves every stage as it is.
$(RUN_DIR)/manifest.source: FORCE
	@mkdir -p $(@D)
	@{ printf '# %s\n' '$(MANIFEST)'; cat '$(MANIFEST)'; } > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

.PHONY: FORCE
FORCE:

$(RUN_DIR)/manifest.json: $(RUN_DIR)/manifest.source $(RUN_DIR)/snapshot.json $(BIN)/mf-hash
	$(call say,"lint and hash the manifest")
	$(BIN)/mf-hash $(MANIFEST) --data-digest $(RUN_DIR)/snapshot -q > $@

$(RUN_DIR)/validate.json: $(RUN_DIR)/manifest.json $(BIN)/ds-validate
	$(call say,"validate the snapshot")
	$(BIN)/ds-validate --profile-out $(RUN_DIR)/profile.json -q < $< > $@

$(RUN_DIR)/leaks.json: $(RUN_DIR)/validate.json $(BIN)/leak-check
	$(call say,"check for leaks")
	$(BIN)/leak-check -q < $< > $@

$(RUN_DIR)/shards.json: $(RUN_DIR)/leaks.json $(BIN)/shardify
	$(call say,"write the shards")
	$(BIN)/shardify --out $(RUN_DIR)/shards -q < $< > $@

$(RUN_DIR)/ckpt.json: $(RUN_DIR)/shards.json $(BIN)/ckpt-interval
	$(BIN)/ckpt-interval --cost 90 --mtbf 43200 --restart 120 -q < $< > $@

# One training per seed, in a folder per manifest hash and seed: killed halfway, a rerun resumes
# from the newest checkpoint; a changed manifest trains afresh beside the old run.
manifest_hash = $$(grep -o '"manifest_hash":"[0-9a-f]*"' $(1) | cut -d'"' -f4 | cut -c1-16)
$(RUN_DIR)/train-seed%.json: $(RUN_DIR)/ckpt.json $(BIN)/train
	$(call say,"train seed $*")
	$(BIN)/train --seed $* --out $(RUN_DIR)/train/$(call manifest_hash,$<)-seed$* -q < $< > $@

$(RUN_DIR)/eval-seed%.json: $(RUN_DIR)/train-seed%.json $(BIN)/evaluate
	$(BIN)/evaluate --bootstrap 200 -q < $< > $@

# The candidate's record (the first seed) with the spread of test AUC over every seed.
$(RUN_DIR)/noise.json: $(foreach s,$(SEEDS),$(RUN_DIR)/eval-seed$(s).json) $(BIN)/noise-floor
	$(call say,"noise floor over seeds $(SEEDS)")
	cat $(filter %.json,$^) | $(BIN)/noise-floor --metric evaluate.overall.auc -q > $@

# The model now serving ($(MODEL)@prod), scored on this run's frozen test split; the first run
# has none, and the gate says so.
$(RUN_DIR)/baseline.json: $(RUN_DIR)/noise.json $(BIN)/evaluate $(BIN)/register
	@if $(BIN)/register resolve $(MODEL)@prod > /dev/null 2>&1; then \
	  printf 'run: %s\n' "score the baseline $(MODEL)@prod" >&2; \
	  $(BIN)/evaluate --as baseline --model $(MODEL)@prod -q < $< > $@; \
	else \
	  printf 'run: %s\n' "no $(MODEL)@prod yet: the first model is gated without a baseline" >&2; \
	  cp $< $@; \
	fi

$(RUN_DIR)/gate.json: $(RUN_DIR)/baseline.json $(BIN)/gate
	$(call say,"gate")
	if grep -q '"baseline":' $<; then $(BIN)/gate < $< > $@; else $(BIN)/gate --no-baseline < $< > $@; fi

$(RUN_DIR)/register.json: $(RUN_DIR)/gate.json $(BIN)/register
	$(call say,"register and promote to $(MODEL)@prod")
	$(BIN)/register --name $(MODEL) --promote prod < $< > $@

## Rewrite the golden files under testdata/ from the current tools; review the diff.
golden:
	scripts/regen-golden.sh

clean:
	rm -rf runs registry
