"""Builds the geops extension (_geops) with CMake for `pip install ./python`.

The package's Python files are geops/*.py; the extension is the CMake target
geops_python of the repository one folder up, built Release without CUDA into
a build tree of its own (or GEOPS_BUILD_DIR, an existing build tree), and
copied into the wheel. Only that target and what it links are compiled.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeExtension(Extension):
    def __init__(self):
        super().__init__("geops._geops", sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        given = os.environ.get("GEOPS_BUILD_DIR")
        build = Path(given).resolve() if given else Path(self.build_temp).resolve() / "cmake"
        if not (ROOT / "CMakeLists.txt").exists():
            sys.exit(f"geops: {ROOT} holds no CMakeLists.txt; install from a checkout of the repository")
        if not (build / "CMakeCache.txt").exists():
            build.mkdir(parents=True, exist_ok=True)
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                            "-DGEOPS_ENABLE_CUDA=OFF", f"-DPython3_EXECUTABLE={sys.executable}"], check=True)
        jobs = str(os.cpu_count() or 2)
        subprocess.run(["cmake", "--build", str(build), "--target", "geops_python", "-j", jobs], check=True)
        built = sorted((build / "python" / "geops").glob("_geops*.so"))
        if not built:
            sys.exit(f"geops: the build left no _geops*.so under {build / 'python' / 'geops'}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)


setup(ext_modules=[CMakeExtension()], cmdclass={"build_ext": CMakeBuild})
