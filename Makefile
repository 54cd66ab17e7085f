# fedprune: documented entry points. `make help` lists them.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SHARED_DATA := $(abspath ../shared/data)
# Real data for tests and benchmarks: $FEDPRUNE_DATA_DIR, else ../shared/data when present.
export FEDPRUNE_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)),$(SHARED_DATA),)
# a reproduction fetches the datasets it lacks (with their checksums) into the data folder,
# ./data unless FEDPRUNE_DATA_DIR names one; downloads never create that folder, so make does
REPRODUCE = mkdir -p "$(or $(FEDPRUNE_DATA_DIR),data)" && $(BIN)/fedprune reproduce

.DEFAULT_GOAL := help
.PHONY: help install test test-fast test-stacked lint format bench bench-cortex-m reproduce-table2 reproduce-table2-quick reproduce-fedcref reproduce-fedcref-quick reproduce-score-ablation reproduce-score-ablation-quick reproduce-phases reproduce-phases-quick reproduce-finetune reproduce-finetune-quick reproduce-noniid reproduce-noniid-quick reproduce-ascfl reproduce-ascfl-quick reproduce-fedhire reproduce-fedhire-quick reproduce-autok reproduce-autok-quick reproduce-device reproduce-device-quick clean

help: ## show this help
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-24s %s\n", $$1, $$2}'

install: $(STAMP) ## create .venv (Python 3.11) with the pinned TF/TFF/tfmot stack (idempotent)

$(STAMP): requirements/stack.txt requirements/stack-nodeps.txt requirements/dev.txt setup.cfg
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required (set PYTHON=/path/to/python3.11)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools
	# step 1: the stack with dependency resolution (jax/jaxlib 0.4.13 stand in for 0.4.14)
	$(BIN)/pip install --quiet -r requirements/stack.txt -r requirements/dev.txt
	# step 2: packages whose declared pins the index cannot satisfy, without their deps
	$(BIN)/pip install --quiet --no-deps -r requirements/stack-nodeps.txt
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -c 'import tensorflow_federated, tensorflow_model_optimization, fedprune'
	touch $(STAMP)

lint: install ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# test processes of `make test` (pytest-xdist); each loads TensorFlow (~1.5 GB of memory)
TEST_WORKERS ?= 2

test: lint ## lint, then all tests in TEST_WORKERS processes (default 2; real-data tests run when the data is found)
	$(BIN)/pytest -q -rs -n $(TEST_WORKERS) --dist loadfile --durations=25

test-stacked: install ## stacked-training tests only (.ci/run: again with TF_ENABLE_ONEDNN_OPTS=1)
	$(BIN)/pytest -q tests/engine/test_stacked.py

test-fast: install ## unit tests only (no TFF computations, no real data)
	$(BIN)/pytest -q -m "not slow and not real_data"

bench: install ## distance to the hardware (zero-overhead bound, tuned peer round), fine-tuning, Fed-HIRE, start-up
	$(BIN)/python experiments/bench_round.py
	$(BIN)/python experiments/bench_finetune.py
	$(BIN)/python experiments/bench_fedhire.py
	$(BIN)/python experiments/bench_startup.py

bench-cortex-m: install ## a client's Cortex-M4 build under QEMU: CMSIS-NN vs TFLM's reference kernels (needs the Arm toolchain)
	$(BIN)/python experiments/bench_cortex_m.py

reproduce-device: install ## pruning on the device: accuracy vs int8 size, arena, LiteRT, Cortex-M, 5 seeds -> results/device.*
	$(REPRODUCE) device --jobs auto

reproduce-device-quick: install ## the same with one seed
	$(REPRODUCE) device --quick --jobs auto

reproduce-table2: install ## the paper's Table 2 on real data, 5 seeds -> results/table2.{md,csv,png}
	$(REPRODUCE) table2 --jobs auto

reproduce-table2-quick: install ## the same with one seed
	$(REPRODUCE) table2 --quick --jobs auto

reproduce-fedcref: install ## FedCRef Tables 5-6 + Figure 8 on MNIST/Fashion/KMNIST, 5 seeds -> results/fedcref_*
	$(REPRODUCE) fedcref --jobs auto

reproduce-fedcref-quick: install ## the same with one seed
	$(REPRODUCE) fedcref --quick --jobs auto

reproduce-score-ablation: install ## CA-AFP score ablation, Tables 3/4/8: 42 runs -> results/score_ablation.*
	$(REPRODUCE) score-ablation --jobs auto

reproduce-score-ablation-quick: install ## the same (the paper's study is one seed already)
	$(REPRODUCE) score-ablation --quick --jobs auto

reproduce-phases: install ## CA-AFP phase sensitivity, Figure 2/Table 7, WISDM, 3 seeds -> results/phases.*
	$(REPRODUCE) phases --jobs auto

reproduce-phases-quick: install ## the same, one seed and a smaller grid
	$(REPRODUCE) phases --quick --jobs auto

reproduce-finetune: install ## fine-tuning study, Figure 3/Table 9, WISDM, 5 seeds -> results/finetune.*
	$(REPRODUCE) finetune --jobs auto

reproduce-finetune-quick: install ## the same with one seed
	$(REPRODUCE) finetune --quick --jobs auto

reproduce-noniid: install ## non-IID robustness, Figure 4/Table 10, WISDM, 5 seeds -> results/noniid.*
	$(REPRODUCE) noniid --jobs auto

reproduce-noniid-quick: install ## the same with one seed
	$(REPRODUCE) noniid --quick --jobs auto

reproduce-autok: install ## K chosen from the data against the papers' fixed K, 5 seeds -> results/autok.*
	$(REPRODUCE) autok --jobs auto

reproduce-autok-quick: install ## the same with one seed
	$(REPRODUCE) autok --quick --jobs auto

reproduce-ascfl: install ## AS-CFL vs CFL/IFCA/FedAvg, sweep, ablation (scaled), 3 seeds -> results/ascfl.*
	$(REPRODUCE) ascfl --jobs auto

reproduce-ascfl-quick: install ## the same: seed 0, MNIST main comparison + rotation-only run
	$(REPRODUCE) ascfl --quick --jobs auto

reproduce-fedhire: install ## Fed-HIRE Tables 3-4, both partitions, 10 seeds (680 runs) -> results/fedhire.*
	$(REPRODUCE) fedhire --jobs auto

reproduce-fedhire-quick: install ## the same: Table 3 only, 3 seeds
	$(REPRODUCE) fedhire --quick --jobs auto

clean: ## remove caches and build outputs (keeps .venv, runs/ and data/)
	rm -rf .pytest_cache .ruff_cache build *.egg-info
