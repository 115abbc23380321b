# Two commands do everything on a fresh machine (Python >= 3.11, a C++ compiler, make, perl):
#   make run    build .venv on first use, then run the embedded default workload
#   make test   build .venv on first use, then run the whole test suite
# The venv has the synth and formal extras (the formal CI set needs z3); `hbfsim rtl timing`
# needs the timing extra as well: .venv/bin/pip install -e '.[timing]'.
# The install also builds the compiled engine, hbfsim._engine (setup.py, engine/**/*.cpp,
# docs/engine.md); an edit there re-runs it. Without a C++ compiler the install still
# succeeds, the engine's tests skip, and the line printed after the install says so.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-stamp
ENGINE := setup.py $(wildcard engine/*.cpp engine/*.hpp engine/*/*.cpp engine/*/*.hpp)

.PHONY: run test bench bench-cosim clean

$(STAMP): pyproject.toml $(ENGINE)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,synth,cluster,formal]'
	$(VENV)/bin/python -c 'from hbfsim.engine import engine_status; print(engine_status())'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/hbfsim run

# -n auto: one pytest-xdist worker per core; tests sharing a wide fixture stay together
# (tests/conftest.py). A focused run (`.venv/bin/python -m pytest tests/x.py`) stays serial.
test: $(STAMP)
	$(VENV)/bin/python -m pytest -n auto --dist loadgroup

bench: $(STAMP)
	$(VENV)/bin/python bench/bench_engine_controller.py --requests 200000

bench-cosim: $(STAMP)
	$(VENV)/bin/python bench/bench_cosim.py

clean:
	rm -rf $(VENV) build *.egg-info waves/*.vcd waves/*.gtkw hbfsim/_engine*.so
