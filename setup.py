"""Build step of the wheel (the metadata is in pyproject.toml).

The repository keeps ``conf/``, ``prompts/`` and ``data/t2ragbench/`` at its top level; a wheel
(``pip install .``, ``pip wheel .``, ``python -m build``, an sdist) gets copies in
``t2exp/_resources/`` so an installed package can start. An editable install copies nothing:
``t2exp.infra.paths`` finds the folders in the checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# source folder (relative to the repository) -> folder under t2exp/_resources/
RESOURCES = {"conf": "conf", "prompts": "prompts", "data/t2ragbench": "data/t2ragbench"}
IGNORE = shutil.ignore_patterns("__pycache__", "*.py[co]", ".*", "*.partial")


class BuildPyWithResources(build_py):
    """``build_py`` that also copies the resource folders into ``<build_lib>/t2exp/_resources``."""

    def run(self) -> None:
        editable = getattr(self, "editable_mode", False)
        if not editable:
            # an in-tree build reuses build/lib: start it empty, or a module or config deleted
            # from the checkout since the last build would still ship
            shutil.rmtree(Path(self.build_lib) / "t2exp", ignore_errors=True)
        super().run()
        if editable:
            return  # editable: the checkout's folders are read in place
        target = Path(self.build_lib) / "t2exp" / "_resources"
        for src, dst in RESOURCES.items():
            if not (HERE / src).is_dir():
                raise FileNotFoundError(f"{HERE / src}: missing; the wheel would have no {src}/")
            shutil.copytree(HERE / src, target / dst, ignore=IGNORE)


setup(cmdclass={"build_py": BuildPyWithResources})
