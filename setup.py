"""The one build step pyproject.toml cannot declare: the dashboard's app files travel inside the wheel.

`streamlit run app.py` (and `make run`) read app.py, pages/ and .streamlit/config.toml at the repository root.
An installed package has no repository root, so the build copies them into the package `cfl_lab` as
`cfl_lab/app/`, where `cfl-lab serve` finds them from any folder (cfl_ui/serve.py, `app_script`). An editable
install (`pip install -e .`) keeps using the files at the root.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
APP_FILES = ("app.py", ".streamlit/config.toml")
APP_FOLDERS = ("pages",)


class BuildWithApp(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "cfl_lab" / "app"
        for name in APP_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
        for name in APP_FOLDERS:
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithApp})
