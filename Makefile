# Two set-up commands, both working on a fresh clone with nothing installed:
#   make demo   runs the main job on embedded defaults
#   make test   runs the test suite
#   make preview  redraws docs/preview.png (the README's screenshot) from synthetic edit chains
#   make preview-magicbrush  redraws docs/preview-magicbrush.png: synthetic MagicBrush-shaped Hub
#                 parquet, converted with --from magicbrush, its multi-turn chains previewed
#   make cli-doc  regenerates docs/cli.md from the commands' --help
# torch==2.13.0 is installed first (the CPU wheel this machine keeps on disk), so the
# package's own permissive torch range is already satisfied and never pulls a CUDA build.
# NeMo Automodel (tests/test_nemo_recipe.py, editstream.nemo) comes last, without its
# dependencies: its config path needs nothing beyond editstream's own, and its BAGEL recipe
# module adds only transformers (with its small pure-Python/tokenizer deps, no torch) and
# einops. If the registry cannot serve them the install goes on and those tests skip, saying why.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.editstream-installed
DEMO_STAMP := $(VENV)/.editstream-demo-installed

.PHONY: demo test test-nemo lint bench bench-quick install clean preview preview-magicbrush cli-doc

# The demo needs the core, torchdata and moto's S3 server only (the [demo] extra); the tests add
# the rest. NeMo's own dependencies come first and NeMo itself last without its dependencies, so
# pip has no unmet requirement to report.
$(DEMO_STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq torch==2.13.0
	$(PY) -m pip install -qq -e '.[demo]'
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	$(PY) -m pip install -qq -e '.[test]'
	$(PY) -m pip install -qq einops transformers==5.18.0 && $(PY) -m pip install -qq --no-deps nemo-automodel==0.7.0 \
		|| echo "NeMo Automodel was not installed: the tests that need it will skip"
	touch $(STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest -q tests -m "not nemo_env and not nemo_source"

# NeMo's own classes as the judge: a second venv with the registry's matching torch 2.14.1 +
# torchvision 0.29.1 (CUDA builds that run on the CPU; ~5 GB, ~3 min to install) and nemo-automodel
# 0.7.0, running the tests marked nemo_env (NeMo's ImageTransform needs torchvision). Kept small, as
# CI machines have had only a few GB free: editstream goes in with the nemo-judge extra (the whole
# test one would add ~0.6 GB), and on the CPU wheel first, so that nothing asks pip to resolve torch
# 2.14.1's requirements, which are then installed without triton (its GPU kernel compiler, 0.9 GB,
# never loaded on a CPU). NeMo's own classes read parquet through pandas.
NEMO_VENV  := .venv-nemo
NEMO_PY    := $(NEMO_VENV)/bin/python
NEMO_STAMP := $(NEMO_VENV)/.editstream-installed
TORCH_NEEDS := import importlib.metadata as m; \
	print("\n".join(r for r in m.requires("torch") if "extra ==" not in r and not r.startswith("triton")))

$(NEMO_STAMP): pyproject.toml Makefile
	test -x $(NEMO_PY) || $(PYTHON) -m venv $(NEMO_VENV)
	$(NEMO_PY) -m pip install -qq torch==2.13.0
	$(NEMO_PY) -m pip install -qq -e '.[nemo-judge]' einops pandas transformers==5.18.0
	$(NEMO_PY) -m pip install -qq --no-deps torch==2.14.1 torchvision==0.29.1
	$(NEMO_PY) -c '$(TORCH_NEEDS)' > $(NEMO_VENV)/torch-needs.txt
	$(NEMO_PY) -m pip install -qq --no-warn-conflicts -r $(NEMO_VENV)/torch-needs.txt
	$(NEMO_PY) -m pip install -qq --no-deps nemo-automodel==0.7.0
	touch $(NEMO_STAMP)

test-nemo: $(NEMO_STAMP)
	$(NEMO_PY) -m pytest -q tests -m nemo_env

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks converters
	$(VENV)/bin/ruff format --check src tests examples benchmarks converters
	$(VENV)/bin/mypy

preview: $(STAMP)
	rm -rf demo-out/preview-src
	$(PY) -m editstream.cli -q synth demo-out/preview-src --files 1 --row-groups 1 --rows 8 \
		--min-side 96 --max-side 160 --seed 3 --corrupt-fraction 0.1 > /dev/null
	$(PY) -m editstream.cli preview demo-out/preview-src -o docs/preview.png -n 6

preview-magicbrush: $(STAMP)
	rm -rf demo-out/magicbrush-hub demo-out/magicbrush-wds demo-out/magicbrush-wds-parquet
	$(PY) converters/magicbrush.py --make-sample demo-out/magicbrush-hub > /dev/null
	$(PY) -m editstream.cli -q convert demo-out/magicbrush-hub/snapshots/0000000/data demo-out/magicbrush-wds \
		--from magicbrush --workers 1 > /dev/null
	$(PY) -m editstream.cli preview demo-out/magicbrush-wds -o docs/preview-magicbrush.png -n 4

cli-doc: $(STAMP)
	$(PY) -m editstream.cli.helpdoc > docs/cli.md

# Every benchmark side by side; writes benchmarks/RESULTS.md (ARGS=--quick, or make bench-quick,
# for a short run on small data). Synthetic data is generated once and cached under bench-out/.
bench: $(STAMP)
	$(PY) benchmarks/run_all.py $(ARGS)

bench-quick: $(STAMP)
	$(PY) benchmarks/run_all.py --quick $(ARGS)

clean:
	rm -rf $(VENV) demo-out bench-out
