# TrainGrid developer tasks. Every install step lives here: a fresh clone needs only python3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SAM_VENV := .venv-sam
SAM_CLI_VERSION := 1.170.0
# The SAM CLI pins its own dependencies, so it lives in a venv of its own.
SAM := $(SAM_VENV)/bin/sam
CHECKOV_VENV := .venv-checkov
CHECKOV_VERSION := 3.3.30
# checkov brings heavy dependencies of its own, so it has a venv of its own too.
CHECKOV := $(CHECKOV_VENV)/bin/checkov
# The trainer's CPU build of PyTorch is large, so it has a venv of its own too.
TRAINER_VENV := .venv-trainer
TRAINER_REQUIREMENTS := containers/mnp/requirements-cpu.txt
# The Step Functions Data Science SDK needs sagemaker 2, whose pins clash with the dev venv's.
NOTEBOOK_VENV := .venv-notebook
NOTEBOOK_CONSTRAINTS := constraints-notebook.txt
NOTEBOOK := examples/inspect-runs.ipynb
NODES ?= 3
PYTEST_ARGS ?=
# The suite spends much of its time waiting on simulated clocks, so it runs a worker per core;
# an idle worker takes tests queued for a busy one (every test stands on its own).
PARALLEL ?= --numprocesses=auto --dist=worksteal

.PHONY: help install demo test unit e2e lint typecheck template-check security-check sam-build \
	schema bench faults clean openmpi sshd chromium trainer-test mpi-smoke push-images notebook-check \
	audit bench-input bench-gpu venvs suite load-check

help:
	@echo "make demo            run both pipelines end to end on the embedded emulator"
	@echo "make test            lint, template and security checks, the whole test suite"
	@echo "make lint            ruff"
	@echo "make typecheck       mypy on the layer, the handlers, the local and the container packages"
	@echo "make template-check  cfn-lint, sam validate --lint and sam build"
	@echo "make security-check  checkov on both templates (findings fixed or skipped with a reason)"
	@echo "make audit           pip-audit: known vulnerabilities in every pinned package"
	@echo "make schema          regenerate schema/*.schema.json from the request models"
	@echo "make bench           measure cold starts, planning 10,000 datasets, the demo"
	@echo "make bench-input     the trainer's input pipeline, legacy and current: images/s a worker"
	@echo "make bench-gpu       images/s per GPU and NCCL all-reduce bandwidth (on a GPU machine)"
	@echo "make faults          every Task state × fault on the emulator: end state, leaks"
	@echo "make load-check      the timing-bound tests 3 times while both cores are kept busy"
	@echo "make trainer-test    the trainer's tests, on the CPU"
	@echo "make mpi-smoke       NODES node entrypoints, a real mpirun, the trainer (FAIL_RANK=K, SLOW_RANK=K,"
	@echo "                     LOSE_NODE=K: node K lost mid-training, HANG_RANK=K: rank K stops stepping)"
	@echo "make push-images     build both images once; node image to HOME_REGION, SageMaker's to REGIONS"
	@echo "make notebook-check  run examples/inspect-runs.ipynb headless on the embedded emulator"

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

$(SAM_VENV)/.installed:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==$(SAM_CLI_VERSION)
	touch $@

$(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip==25.3
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==$(CHECKOV_VERSION)
	touch $@

# mpi4py builds against this machine's Open MPI (make openmpi: its mpicc and headers).
$(TRAINER_VENV)/.installed: $(TRAINER_REQUIREMENTS) | openmpi
	$(PYTHON) -m venv $(TRAINER_VENV)
	$(TRAINER_VENV)/bin/pip install --quiet --upgrade pip==25.3
	$(TRAINER_VENV)/bin/pip install --quiet -r $(TRAINER_REQUIREMENTS)
	touch $@

# After .venv's (order only): both install the project in place, and two builds of its
# metadata at once (make -j4 venvs) would write the same egg-info.
$(NOTEBOOK_VENV)/.installed: pyproject.toml $(NOTEBOOK_CONSTRAINTS) | $(VENV)/.installed
	$(PYTHON) -m venv $(NOTEBOOK_VENV)
	$(NOTEBOOK_VENV)/bin/pip install --quiet --upgrade pip==25.3
	$(NOTEBOOK_VENV)/bin/pip install --quiet -c $(NOTEBOOK_CONSTRAINTS) -e '.[notebook]'
	touch $@

# Open MPI 4.1, the major version of the node image's (Debian's openmpi-bin), unless one is here,
# with its mpicc and headers (libopenmpi-dev), which the trainer venv's mpi4py is built with.
openmpi:
	@command -v mpirun >/dev/null && echo '#include <mpi.h>' | mpicc -x c -E - >/dev/null 2>&1 || { \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
			-y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null; }
	@mpirun --version | head -n 1

# Debian's OpenSSH server and client: make mpi-smoke's nodes run the real sshd, mpirun the real
# ssh, as on AWS (the node image has them too).
sshd:
	@command -v /usr/sbin/sshd >/dev/null && command -v ssh >/dev/null || { \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
			-y -qq --no-install-recommends openssh-server openssh-client >/dev/null; }
	@/usr/sbin/sshd -V 2>&1 | head -n 1

# Debian's Chromium, which Playwright drives in the console's browser tests (tests/console).
chromium:
	@command -v chromium >/dev/null || { \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
			-y -qq --no-install-recommends chromium >/dev/null; }
	@chromium --version

demo: install
	$(BIN)/traingrid demo

# make test's stages, each timed (tools/stages.py prints the times at its end): Debian's
# packages (apt runs one at a time), every venv side by side, then three lanes at once: the
# trainer's tests and the namespace smoke (mostly waiting on their processes), the static
# checks and the notebook (one core), and the suite (a worker per core, often waiting on
# simulated clocks). Their rigs' namespaces are named for their processes: they never meet.
test:
	@$(PYTHON) tools/stages.py "openmpi sshd chromium" "-j4 venvs" \
		"trainer-test ; mpi-smoke NODES=2 & lint ; typecheck ; template-check ; \
		security-check ; notebook-check & suite"

venvs: install $(TRAINER_VENV)/.installed $(SAM_VENV)/.installed \
	$(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION) $(NOTEBOOK_VENV)/.installed

suite: install
	$(BIN)/pytest $(PARALLEL) $(PYTEST_ARGS)

# The suite's timing-bound tests (tests/conftest.py: TIMING_MODULES) three times in a row while
# two processes keep both cores busy: each round must pass.
LOAD_ROUNDS ?= 3
load-check: install chromium
	@hogs=""; for i in 1 2; do $(PYTHON) -c 'while True: pass' & hogs="$$hogs $$!"; done; \
	trap 'kill $$hogs 2>/dev/null' EXIT INT TERM; \
	for round in $$(seq 1 $(LOAD_ROUNDS)); do \
		echo "load-check: round $$round of $(LOAD_ROUNDS), both cores kept busy"; \
		$(BIN)/pytest -m timing $(PARALLEL) -q $(PYTEST_ARGS) || exit 1; \
	done; echo "load-check: $(LOAD_ROUNDS) of $(LOAD_ROUNDS) rounds passed"

unit: install
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

e2e: install
	$(BIN)/pytest tests/integration -m e2e $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

# The node entrypoint ships alone in the image (standard library only): strict there. The
# trainer is checked against its own venv's packages (torch's types), by the dev venv's mypy.
typecheck: install $(TRAINER_VENV)/.installed
	$(BIN)/mypy layers/traingrid/python/traingrid
	for handler in functions/*/app.py; do $(BIN)/mypy $$handler || exit 1; done  # each is "app"
	$(BIN)/mypy --strict containers/mnp/traingrid_node
	$(BIN)/mypy src/traingrid_local
	$(BIN)/mypy --python-executable $(TRAINER_VENV)/bin/python containers/mnp/traingrid_trainer

# The root template, the nested ones under stacks/ (sam build builds them with the root's) and
# the regional one.
TEMPLATES := template.yaml $(sort $(wildcard stacks/*.yaml))

template-check: install $(SAM_VENV)/.installed
	$(BIN)/cfn-lint $(TEMPLATES) regional/template.yaml
	for template in $(TEMPLATES); do \
		AWS_DEFAULT_REGION=us-east-1 $(SAM) validate --lint --template $$template || exit 1; \
	done
	$(MAKE) sam-build

# A finding fails the build unless the resource's Metadata skips it with a reason.
security-check: $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)
	$(CHECKOV) --quiet --compact --skip-download --framework cloudformation \
		$(addprefix --file ,$(TEMPLATES)) --file regional/template.yaml

# Known vulnerabilities (PyPA advisories, via PyPI's JSON API per version; AUDIT_SERVICE=osv asks
# OSV) in the dev venv's pins, the trainer's and what the images install. --strict: a package
# that cannot be looked up fails the audit rather than passing unaudited. Not in make test: it
# needs those services, which a machine without them cannot reach.
AUDIT_SERVICE ?= pypi
AUDIT := $(BIN)/pip-audit --strict --progress-spinner off --vulnerability-service $(AUDIT_SERVICE) \
	--disable-pip
# One run per environment: the same package may be pinned differently in two of them.
audit: install
	$(AUDIT) --no-deps -r constraints.txt
	$(AUDIT) --no-deps -r $(TRAINER_REQUIREMENTS)
	$(AUDIT) --require-hashes -r containers/mnp/requirements-image.txt \
		-r containers/sagemaker/requirements.txt -r containers/sagemaker/requirements-build.txt

# The trainer and its tests need only the trainer's venv (and mpirun for the multi-rank ones;
# sshd and root for SageMaker's toolkit on two hosts, tests/test_sagemaker_toolkit.py).
trainer-test: openmpi sshd $(TRAINER_VENV)/.installed
	$(TRAINER_VENV)/bin/pytest -c tests/trainer/pytest.ini --rootdir=. tests/trainer $(PYTEST_ARGS)

# NODES nodes in network and mount namespaces of their own (root), with the job's environment
# as the job definition and a plan give it (smoke_job.py, in the dev venv), the real sshd and ssh.
# FAIL_RANK=K makes rank K exit 3; the smoke then exits 3 too. LOSE_NODE=K takes worker node K
# away mid-training (a run with min_nodes one fewer, or MIN_NODES: elastic torchrun): the others
# finish it; HANG_RANK=K makes rank K stop stepping: the watchdog ends the job with 71.
mpi-smoke: openmpi sshd install $(TRAINER_VENV)/.installed
	@job=$$(mktemp) && trap 'rm -f "$$job"' EXIT && \
	$(BIN)/python containers/mnp/smoke_job.py --nodes $(NODES) > "$$job" && \
	PYTHONPATH=containers/mnp $(TRAINER_VENV)/bin/python containers/mnp/mpi_smoke.py \
		--nodes $(NODES) --job "$$job"

# Build the node image and the SageMaker image on it once; push the node image to the main
# stack's repository and the SageMaker image to each campaign region's (needs Docker and
# the AWS CLI): make push-images HOME_REGION=us-east-1 REGIONS="us-east-1 eu-west-1" [TAG=]
# [ACCOUNT=] [NODE_REPOSITORY=] [REPOSITORY=]. Both images are tagged with TAG, by default the
# project's version (the template's NodeImageTag).
push-images:
	HOME_REGION="$(HOME_REGION)" REGIONS="$(REGIONS)" ACCOUNT="$(ACCOUNT)" \
		NODE_REPOSITORY="$(NODE_REPOSITORY)" REPOSITORY="$(REPOSITORY)" \
		TAG="$(or $(TAG),$(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml))" \
		containers/push-images.sh

# Every cell of the sample notebook, run headless on the embedded emulator; a failing cell fails.
# The executed copy, with its outputs, is left in test-artifacts/notebook/.
notebook-check: $(NOTEBOOK_VENV)/.installed
	mkdir -p test-artifacts/notebook
	SAGEMAKER_SUPPRESS_V2_WARNING=1 $(NOTEBOOK_VENV)/bin/jupyter execute --timeout=600 \
		--output=../test-artifacts/notebook/inspect-runs $(NOTEBOOK)

sam-build: $(SAM_VENV)/.installed
	AWS_DEFAULT_REGION=us-east-1 SAM_CLI_TELEMETRY=0 $(SAM) build --template template.yaml

bench: install
	$(BIN)/python -m traingrid_local.bench

# The trainer's input pipeline on ImageNet-like JPEG shards (made for the run): the legacy and
# the current pipeline in turns, RUNS each, their medians and ratio (at least 2x, or it fails),
# and how many GPUs each instance type's vCPUs can feed. A benchmark: not part of make test.
RUNS ?= 5
bench-input: $(TRAINER_VENV)/.installed
	cd containers/mnp && OMP_NUM_THREADS=1 ../../$(TRAINER_VENV)/bin/python \
		-m traingrid_trainer.bench input --runs $(RUNS)

# Images/s per GPU (synthetic and the real pipeline) and all-reduce bus bandwidth, against
# the published per-GPU figures. Needs a CUDA build of PyTorch: on a GPU instance, in the node
# image, make bench-gpu GPU_PYTHON=python3 (no venv made). Without a GPU it says so, exit 0.
bench-gpu: $(if $(GPU_PYTHON),,$(TRAINER_VENV)/.installed)
	cd containers/mnp && $(or $(GPU_PYTHON),../../$(TRAINER_VENV)/bin/python) \
		-m traingrid_trainer.bench gpu

faults: install
	$(BIN)/traingrid faults

schema: install
	$(BIN)/python -m traingrid_local.schemas write

clean:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) $(TRAINER_VENV) .aws-sam .pytest_cache .ruff_cache
