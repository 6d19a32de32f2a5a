# serverless-scheduler — every command a developer or CI needs.
# `make test` bootstraps .venv itself, so a fresh clone needs nothing installed by hand.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# checkov (scans the synthesized template in `make test`) in a venv of its own: its pins
# would move boto3 and botocore in .venv. tests/infra/test_checkov.py runs it from here.
CHECKOV_VENV  := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
DEPS_LAYER := layers/deps/python/.built
PYTEST_ARGS ?=
# `make test` runs pytest on this many xdist workers; the local cloud's tests (e2e) and the
# CDK syntheses (infra) each stay on one worker (tests/conftest.py). One worker more than
# this machine's 2 cores: the e2e tests mostly wait on the clock (a cron job's two minute
# marks alone take 45 s). PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 3

.PHONY: install test lint unit integration infra-test e2e synth deploy run bench clean docs docs-serve

install: $(STAMP) $(DEPS_LAYER) $(CHECKOV_STAMP) console-assets

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet 'checkov>=3.3,<4'
	touch $(CHECKOV_STAMP)

# The console's browser tests drive Debian's chromium with Playwright (Playwright's own browser
# download is not used): installed once by `make test`, when /usr/bin/chromium is missing
# (needs apt and root or sudo; elsewhere install chromium yourself).
.PHONY: browser
browser:
	@test -x /usr/bin/chromium || { \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# The console's browser libraries (cli/console/package.json: Cytoscape and its dagre layout),
# npm-installed here and copied into the package's static/vendor/ (gitignored): the page
# fetches nothing from the internet.
CONSOLE_NPM    := cli/console
CONSOLE_VENDOR := cli/scheduler_cli/console/static/vendor
.PHONY: console-assets
console-assets: $(CONSOLE_VENDOR)/.built
$(CONSOLE_VENDOR)/.built: $(CONSOLE_NPM)/package.json $(CONSOLE_NPM)/package-lock.json
	cd $(CONSOLE_NPM) && npm ci --no-audit --no-fund --loglevel=error
	mkdir -p $(CONSOLE_VENDOR)
	cp $(CONSOLE_NPM)/node_modules/cytoscape/dist/cytoscape.esm.min.mjs $(CONSOLE_VENDOR)/cytoscape.esm.min.js
	cp $(CONSOLE_NPM)/node_modules/cytoscape/LICENSE $(CONSOLE_VENDOR)/cytoscape.LICENSE
	cp $(CONSOLE_NPM)/node_modules/cytoscape-dagre/dist/cytoscape-dagre.min.mjs $(CONSOLE_VENDOR)/cytoscape-dagre.esm.min.js
	cp $(CONSOLE_NPM)/node_modules/cytoscape-dagre/LICENSE $(CONSOLE_VENDOR)/cytoscape-dagre.LICENSE
	touch $@

# Third-party packages for Lambda, built for the Lambda platform without Docker.
$(DEPS_LAYER): layers/deps/requirements.txt infra/config.py infra/build_deps_layer.py | $(STAMP)
	$(PY) -m infra.build_deps_layer

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The browser only the console's browser tests need: not part of `make install`, so `make run`
# needs no root and no apt.
test: lint docs browser
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

unit: install
	$(VENV)/bin/pytest tests/unit $(PYTEST_ARGS)

integration: install
	$(VENV)/bin/pytest tests/integration $(PYTEST_ARGS)

infra-test: install
	$(VENV)/bin/pytest tests/infra $(PYTEST_ARGS)

# Synthesize offline (no Docker, no credentials, no network) and print the template path.
synth: install
	$(PY) -m infra.synth

# The whole stack on this machine, offline: API on http://127.0.0.1:8080 (PORT=0: any port).
PORT ?= 8080
run: install
	$(PY) -m infra.local --port $(PORT)

# Fire lateness, dispatch overhead, requests per run and start latency per priority under
# pressure; prints tables, writes bench-results/latest.json.
bench: install
	$(PY) -m bench

# Chaos soak (not in `make test`): 2,000 one-off jobs and 200 workflows over 5 minutes, 20%
# of target calls fail, a worker process is SIGKILLed every 10 s; fails if a run is lost,
# succeeds twice or reaches its target twice, or a workflow run is stuck, a task starts twice
# or breaks its rule. Writes bench-results/chaos.json.
# A short try: make chaos CHAOS_ARGS='--jobs 200 --workflows 30 --spread-seconds 60'
CHAOS_ARGS ?= --workflows 200
.PHONY: chaos
chaos: install
	$(PY) -m bench.chaos $(CHAOS_ARGS)

# Capacity simulation (not in `make test`): the real scheduler_core services in virtual time
# against in-process moto with models of AWS latency, DynamoDB partition limits and throttling,
# SQS and Lambda scaling (issue 10 §1). Prints a table, writes bench-results/capacity.json.
# A short try: make capacity CAPACITY_ARGS='--scenario validate --scale 0.1'
# midnight and steady are sampled (a fraction of the jobs run for real, the rest as shadow
# load: bench/capacity/scenarios.py); CAPACITY_ARGS='--fraction 0.001' samples more.
# Under 10 minutes here (six scenarios, two at a time: CAPACITY_ARGS='--jobs 1' runs one).
CAPACITY_ARGS ?=
.PHONY: capacity
capacity: install
	$(PY) -m bench.capacity $(CAPACITY_ARGS)

# 10,000,000 one-offs due over one minute, sampled, tuned settings (about 8 minutes).
.PHONY: capacity-burst
capacity-burst: install
	$(PY) -m bench.capacity --scenario burst-10m-tuned --output bench-results/capacity-burst.json

# Deploy to the AWS account of your current credentials.
deploy: install
	npx --yes aws-cdk@2 deploy --app "$(PY) -m infra.app" --require-approval never

# Move the deployed stack's DLQ back: FAILED runs get a new attempt, poison run messages go
# back to their queue, the unreadable stay. Your AWS credentials and region (AWS_PROFILE,
# AWS_REGION), or the local cloud: make redrive ENDPOINT=<the moto URL `make run` printed>.
# STACK=<name> (default ServerlessScheduler), LIMIT=<at most this many messages>.
STACK ?= ServerlessScheduler
ENDPOINT ?=
LIMIT ?=
.PHONY: redrive
redrive: $(STAMP)
	$(PY) -m infra.redrive --stack $(STACK) $(if $(ENDPOINT),--endpoint-url $(ENDPOINT)) $(if $(LIMIT),--limit $(LIMIT))

# Once, after deploying the release that keys tenants on unique principal ids: move tenants
# kept under their ARN to those ids (docs/security.md, "Tenants"). DRY_RUN=1 prints only.
DRY_RUN ?=
.PHONY: migrate-tenants
migrate-tenants: $(STAMP)
	$(PY) -m infra.migrate_tenants --stack $(STACK) $(if $(ENDPOINT),--endpoint-url $(ENDPOINT)) $(if $(DRY_RUN),--dry-run)

clean:
	rm -rf cdk.out site .pytest_cache .mypy_cache .ruff_cache layers/deps/python

# The documentation site (mkdocs-material), built offline; `--strict` fails on a broken link
# or anchor (not with --quiet, which hides the warnings strict counts). The API reference is
# generated from the API's OpenAPI document as it builds.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve
