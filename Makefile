# The two entry points of the README. Both install what they need first (once).
PYTHON ?= python3
PIP := $(PYTHON) -m pip
TASK ?= takeoff 1.0; goto red_box; goto green_box; goto blue_box; goto 1.5 3.0 1.0; land

.PHONY: install demo test test-fast bench isaaclab
install: .install.stamp
.install.stamp: setup.py
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	@touch $@

# The navigation stack in simulation: shipped model, symbolic planner, headless, ends by itself.
demo: install
	robot-hrl launch navigation --world models/worlds/demo.yaml --task "$(TASK)" --out runs/demo

test: install
	$(PYTHON) -m pytest -n 2 --dist loadgroup

test-fast: install
	$(PYTHON) -m pytest -n 2 --dist loadgroup -m "not slow"

bench: install
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PYTHON) $$f || exit 1; done

# Isaac Lab 3.0 (Python 3.12 venv, cached under ~/.cache/robot_hrl/isaaclab) and its tests: .ci/isaaclab --help
isaaclab:
	bash .ci/isaaclab
