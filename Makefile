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

# The caller's folder, against which relative paths (MANIFEST, RUN_DIR, REGISTRY, the manifest's
# snapshot) resolve: where `make -C clone run` or `make -f clone/Makefile run` was typed, not the
# clone. Under -C make runs in the clone and only the environment's PWD still says where the
# caller was; anywhere else make already runs in the caller's folder.
ifeq ($(realpath $(CURDIR)),$(realpath $(ROOT)))
CALLER_DIR := $(or $(realpath $(PWD)),$(CURDIR))
else
CALLER_DIR := $(CURDIR)
endif

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

# The run: its manifest, the demo snapshot's size, the model's name in the registry, the training
# seeds (the first is the candidate; all of them measure the noise floor) and the registry. The
# snapshot is the one the manifest names (data.snapshot, relative to the current folder, as every
# tool reads it); only the demo manifest's snapshot is generated.
DEMO_MANIFEST := $(ROOT)/testdata/demo/manifest.yaml
MANIFEST ?= $(DEMO_MANIFEST)
RUN_DIR ?= runs/demo
ROWS ?= 200000
MODEL ?= churn
SEEDS ?= 7 8 9
REGISTRY ?= registry
export RUNFN_REGISTRY := $(REGISTRY)
# Where the shards and the trainings (checkpoints, weights, metrics) go: RUN_DIR, or a store URL
# such as s3://bucket/runs/demo (the records stay under RUN_DIR). The registry's blobs go to a
# store when RUNFN_REGISTRY_BLOBS names one; its index stays in REGISTRY.
STORE ?= $(RUN_DIR)
# Drift is checked against the profile of $(MODEL)@prod in the registry, or against PREVIOUS (a
# profile file) when given; EXPLAINED lists drifts a person has accepted.
PREVIOUS ?=
EXPLAINED ?=

.PHONY: all build test lint bench run retrain golden clean

all: build

build:
	$(CARGO) build --manifest-path $(ROOT)/Cargo.toml --workspace --bins --quiet

## Every test: unit tests of each crate and the integration tests that run the real binaries.
test: build
	$(CARGO) test --manifest-path $(ROOT)/Cargo.toml --workspace --quiet

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --quiet -- -D warnings

## Benchmarks against the named peers; results as JSON under bench/. Never part of `make test`.
bench:
	scripts/bench-mf-hash.sh
	scripts/bench-data.sh
	scripts/bench-train.sh
	scripts/bench-ddp.sh
	scripts/bench-gate.sh

## The pipeline (by default on the built-in demo): one record per stage under RUN_DIR, each stage
## reading the previous stage's record, ending with a registered model. Stages depend on their
## inputs and on the binaries as files, so a second `make run` with nothing changed does nothing,
## and a changed manifest or snapshot retrains. A failing stage (the gate blocking included) stops
## the run without writing its output, keeps its record as RUN_DIR/failed.json, and runs the alert
## command (RUNFN_ALERT_CMD, else the manifest's `alert:`; see scripts/alert.sh). Either way the
## night's page shows that night (RUN_DIR/report.html) and its records are kept under
## RUN_DIR/nights/<UTC time>/, which `report history` reads.
## The stages run in the caller's folder (see CALLER_DIR).
run: build
	@cd '$(CALLER_DIR)' && rm -f $(RUN_DIR)/failed.json $(RUN_DIR)/failed.err $(RUN_DIR)/failed.stage
	@cd '$(CALLER_DIR)' && { $(MAKE) --no-print-directory -f $(ROOT)/Makefile stages || { code=$$?; \
	  $(ROOT)/scripts/alert.sh '$(RUN_DIR)' '$(MANIFEST)' '$(MODEL)' '$(BIN)'; \
	  $(MAKE) --no-print-directory -f $(ROOT)/Makefile night-page night-archive; exit $$code; }; }
	@cd '$(CALLER_DIR)' && $(MAKE) --no-print-directory -f $(ROOT)/Makefile night-archive
	@cd '$(CALLER_DIR)' && echo "run: done; $(MODEL)@prod is version $$($(BIN)/register resolve $(MODEL)@prod | grep -o '"version":[0-9]*' | cut -d: -f2); records under $(RUN_DIR)/, the page: $(RUN_DIR)/report.html"

## Retraining from cron: one run at a time (a lock), appended to RUN_DIR/retrain.log (rotated by
## size), non-zero when a stage fails. Relative paths are the caller's, as for `run`.
retrain:
	@cd '$(CALLER_DIR)' && $(ROOT)/scripts/retrain.sh RUN_DIR='$(RUN_DIR)' $(RETRAIN_ARGS)

# A failed night's page: that night's records and why it stopped (the stage's failed.* files).
.PHONY: night-page night-archive
night-page:
	@$(BIN)/report $(RUN_DIR) --html $(RUN_DIR)/report.html --registry '$(REGISTRY)' --model $(MODEL) \
	  > $(RUN_DIR)/report-failed.json.new \
	  && mv -f $(RUN_DIR)/report-failed.json.new $(RUN_DIR)/report-failed.json \
	  || { rm -f $(RUN_DIR)/report-failed.json.new; echo "run: could not draw the failed night's page" >&2; }

# The night's records, kept for the history page: copied once per night (a rerun that changed
# nothing keeps no second copy). Then the nights side by side: RUN_DIR/history.html.
night-archive:
	@$(ROOT)/scripts/archive-night.sh '$(RUN_DIR)'
	@$(BIN)/report history $(RUN_DIR)/nights/*/ --registry '$(REGISTRY)' --model $(MODEL) \
	  --html $(RUN_DIR)/history.html > $(RUN_DIR)/history.json.new \
	  && mv -f $(RUN_DIR)/history.json.new $(RUN_DIR)/history.json \
	  || { rm -f $(RUN_DIR)/history.json.new; echo "run: could not draw the history page" >&2; }

.PHONY: stages
stages: $(RUN_DIR)/report.json

CANDIDATE := $(firstword $(SEEDS))
say = @printf 'run: %s\n' $(1) >&2

# A stage: its record becomes $@ only when the command passes. A failing command's record (kept
# by exit 1, empty after exit 2) goes to failed.json, its stderr to failed.err and the stage's
# name and exit code to failed.stage, for the alert; $@ is not written, and an older $@ is removed
# so no stale record reads as today's. stderr is passed on once the stage ends. A training
# preempted (exit 3) is a failure of the machine: its time goes to failures.txt, for the MTBF.
stage = { $(1); } > $@.new 2> $@.err && { cat $@.err >&2; rm -f $@.err; mv -f $@.new $@; } || { \
  code=$$?; cat $@.err >&2; rm -f $@; mv -f $@.new $(RUN_DIR)/failed.json; \
  if [ $$code = 3 ]; then date -u +%s >> $(RUN_DIR)/failures.txt; fi; \
  mv -f $@.err $(RUN_DIR)/failed.err; \
  printf '%s %s\n' $(basename $(notdir $@)) $$code > $(RUN_DIR)/failed.stage; exit $$code; }
snapshot_of = $$($(BIN)/mf-hash '$(MANIFEST)' --print snapshot)

ifeq ($(abspath $(MANIFEST)),$(DEMO_MANIFEST))
DEMO_SNAPSHOT := $(RUN_DIR)/snapshot.json
endif

# The demo manifest's snapshot, generated deterministically where it says (./runs/demo/snapshot).
$(RUN_DIR)/snapshot.json: $(BIN)/demo-data $(BIN)/mf-hash
	@mkdir -p $(@D)
	$(call say,"generating the demo snapshot ($(ROWS) rows)")
	$(BIN)/demo-data --out "$(snapshot_of)" --rows $(ROWS) --seed 7 -q > $@

.PHONY: FORCE
FORCE:

# The manifest linted and hashed, with the digest of the snapshot it names, every run (one blake3
# pass; a pinned snapshot that moved is refused here, naming the file). The record is replaced only
# when the manifest's hash or the snapshot's digest changed: an unchanged day reruns nothing, and a
# new snapshot at the same path retrains.
# A new night (another manifest or snapshot) removes the last night's later records first, so a
# night that stops early never leaves an earlier night's gate or registration in the folder.
NIGHT_RECORDS := validate.json leaks.json shards.json ckpt.json noise.json baseline.json \
  gate.json register.json report.json report-failed.json
identity = grep -o '"manifest_hash":"[0-9a-f]*"\|"data_digest":{[^}]*}' $(1)
$(RUN_DIR)/manifest.json: $(DEMO_SNAPSHOT) $(BIN)/mf-hash FORCE
	@mkdir -p $(@D)
	@{ snapshot="$(snapshot_of)" && \
	  $(BIN)/mf-hash '$(MANIFEST)' --data-digest "$$snapshot"; } > $@.next 2> $@.err || { \
	  code=$$?; cat $@.err >&2; mv -f $@.next $(RUN_DIR)/failed.json; \
	  mv -f $@.err $(RUN_DIR)/failed.err; printf 'manifest %s\n' $$code > $(RUN_DIR)/failed.stage; \
	  exit $$code; }
	@cat $@.err >&2; rm -f $@.err
	@if [ -f $@ ] && [ "$$($(call identity,$@.next))" = "$$($(call identity,$@))" ]; then \
	  rm $@.next; \
	else \
	  printf 'run: %s\n' "linted and hashed the manifest; snapshot $$($(BIN)/mf-hash '$(MANIFEST)' --print snapshot)" >&2; \
	  rm -f $(addprefix $(RUN_DIR)/,$(NIGHT_RECORDS)) $(RUN_DIR)/train-seed*.json $(RUN_DIR)/eval-seed*.json; \
	  mv $@.next $@; \
	fi

$(RUN_DIR)/validate.json: $(RUN_DIR)/manifest.json $(BIN)/ds-validate
	$(call say,"validate the snapshot")
	@$(call stage,$(BIN)/ds-validate --profile-out $(RUN_DIR)/profile.json \
	  $(if $(PREVIOUS),--previous '$(PREVIOUS)',--previous-model $(MODEL)@prod --registry '$(REGISTRY)') \
	  $(if $(EXPLAINED),--explained '$(EXPLAINED)') < $<)

$(RUN_DIR)/leaks.json: $(RUN_DIR)/validate.json $(BIN)/leak-check
	$(call say,"check for leaks")
	@$(call stage,$(BIN)/leak-check < $<)

$(RUN_DIR)/shards.json: $(RUN_DIR)/leaks.json $(BIN)/shardify
	$(call say,"write the shards")
	@$(call stage,$(BIN)/shardify --out '$(STORE)/shards' < $<)

# Checkpoints planned from measurements: the write and step times train measured on the newest
# earlier night that trained (RUN_DIR/nights/*), and the MTBF from the preemptions seen
# (RUN_DIR/failures.txt, a time per training that exited 3; 12 hours until two are seen).
# Before any night measured there is no plan: train checkpoints every config.ckpt_every steps.
$(RUN_DIR)/ckpt.json: $(RUN_DIR)/shards.json $(BIN)/ckpt-interval
	@measured=$$(LC_ALL=C ls -1 $(RUN_DIR)/nights/*/train-seed$(CANDIDATE).json 2> /dev/null | tail -n 1 || true); \
	if [ -n "$$measured" ]; then \
	  mtbf="--mtbf 43200"; \
	  if [ "$$(wc -l < $(RUN_DIR)/failures.txt 2> /dev/null || echo 0)" -ge 2 ]; then \
	    mtbf="--failures $(RUN_DIR)/failures.txt"; fi; \
	  printf 'run: %s\n' "plan checkpoints from $$measured" >&2; \
	  $(call stage,$(BIN)/ckpt-interval --measured "$$measured" $$mtbf --restart 120 < $<); \
	else \
	  printf 'run: %s\n' "no checkpoint cost measured yet: checkpoints follow config.ckpt_every tonight" >&2; \
	  cp $< $@; \
	fi

# One training per seed, in a folder per manifest hash, shards and seed: killed halfway, a rerun
# resumes from the newest checkpoint; a changed manifest trains afresh beside the old run, and so
# does the next night's data under the same manifest (rolling splits keep its hash).
manifest_hash = $$(grep -o '"manifest_hash":"[0-9a-f]*"' $(1) | cut -d'"' -f4 | cut -c1-16)
shards_hash = $$(grep -o '"index_blake3":"[0-9a-f]*"' $(1) | head -n 1 | cut -d'"' -f4 | cut -c1-12)
$(RUN_DIR)/train-seed%.json: $(RUN_DIR)/ckpt.json $(BIN)/train
	$(call say,"train seed $*")
	@$(call stage,$(BIN)/train --seed $* --out '$(STORE)/train/'$(call manifest_hash,$<)-$(call shards_hash,$<)-seed$* < $<)

$(RUN_DIR)/eval-seed%.json: $(RUN_DIR)/train-seed%.json $(BIN)/evaluate
	@$(call stage,$(BIN)/evaluate --bootstrap 200 < $<)

# The candidate's record (the first seed) with the spread of test AUC over every seed.
$(RUN_DIR)/noise.json: $(foreach s,$(SEEDS),$(RUN_DIR)/eval-seed$(s).json) $(BIN)/noise-floor
	$(call say,"noise floor over seeds $(SEEDS)")
	@$(call stage,cat $(filter %.json,$^) | $(BIN)/noise-floor --metric evaluate.overall.auc)

# The model now serving ($(MODEL)@prod), scored on this run's frozen test split; the first run
# has none, and the gate says so.
$(RUN_DIR)/baseline.json: $(RUN_DIR)/noise.json $(BIN)/evaluate $(BIN)/register
	@if $(BIN)/register resolve $(MODEL)@prod > /dev/null 2>&1; then \
	  printf 'run: %s\n' "score the baseline $(MODEL)@prod" >&2; \
	  $(call stage,$(BIN)/evaluate --as baseline --model $(MODEL)@prod < $<); \
	else \
	  printf 'run: %s\n' "no $(MODEL)@prod yet: the first model is gated without a baseline" >&2; \
	  cp $< $@; \
	fi

$(RUN_DIR)/gate.json: $(RUN_DIR)/baseline.json $(BIN)/gate
	$(call say,"gate")
	@$(call stage,$(BIN)/gate $$(grep -q '"baseline":' $< || echo --no-baseline) < $<)

$(RUN_DIR)/register.json: $(RUN_DIR)/gate.json $(BIN)/register
	$(call say,"register and promote to $(MODEL)@prod")
	@$(call stage,$(BIN)/register --name $(MODEL) --promote prod < $<)

# The run read back: the workflow map, predicted vs measured, and the page to look at
# (report.html, self-contained) with TensorBoard event files beside it.
$(RUN_DIR)/report.json: $(RUN_DIR)/register.json $(BIN)/report
	$(call say,"report: $(RUN_DIR)/report.html")
	@$(call stage,$(BIN)/report $(RUN_DIR) --html $(RUN_DIR)/report.html --tensorboard $(RUN_DIR)/tensorboard \
	  --registry '$(REGISTRY)' --model $(MODEL))

## Rewrite the golden files under testdata/ from the current tools; review the diff.
golden:
	scripts/regen-golden.sh

clean:
	rm -rf runs registry
