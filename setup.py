"""The wheel carries the repository's configs/ as package data (exo_rt/configs/): a wheel
install runs `exo-rt run` from any directory (exo_rt/resources.py finds them). Everything else
is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONFIGS = Path(__file__).resolve().parent / "configs"


class BuildWithConfigs(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads configs/ itself
            return
        target = Path(self.build_lib) / "exo_rt" / "configs"
        shutil.copytree(CONFIGS, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": BuildWithConfigs})
