"""What the tests share that is no fixture: the repository root and the tests' folder (``paths``),
the app run in this process or as a process (``app``), a command-line entry point run in this
process (``command``), the MLflow store a test reads and seeds (``tracking``), a cache given the
corpora's vectors (``caches``), the stores' shared corpus and factories (``stores``). The fixtures
and hooks stay in ``tests/conftest.py``; tests import these modules (``from helpers.app import
run_app``), never ``conftest``."""
