#!/usr/bin/env python3
"""Dependencies run one way. Every product folder may include only the
folders below it in this table; cli/ sits on top and nothing includes it.
A new folder must be added here before it builds into the test.

    include_graph.py SOURCE_DIR

Prints each include that goes the wrong way (file, line, what it includes,
and what the folder may include) and exits 1; exits 0 with a count when
the graph is clean."""

import os
import re
import sys

BASE = ["common"]
LAYER1 = BASE + ["storage", "datacenter", "wan", "worker"]
RPC = LAYER1 + ["thrift"]
CONFIG = RPC + ["config", "metrics"]
# folder -> the folders its sources may include (besides itself)
ALLOWED = {
    "common": [],
    "storage": BASE,
    "datacenter": BASE,   # datacenter/ and wan/ meet only through common/
    "wan": BASE,
    "worker": BASE,
    "thrift": LAYER1,
    "config": RPC,
    "metrics": RPC,
    "certs": CONFIG,
    "site": CONFIG + ["certs"],
    "supervisor": CONFIG + ["certs"],
    "include": [],        # the public C++ client headers: geops/...
    "client": CONFIG + ["include"],
    "python/src": CONFIG,
    "cli": CONFIG + ["certs", "site", "supervisor"],
}
# what an include's first path component names
TOP = {"geops": "include", "python": "python/src"}
SOURCE = re.compile(r".*\.(h|cc|cu|cuh|cpp)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def folder_of(include_top):
    return TOP.get(include_top, include_top)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    known = set(ALLOWED)
    bad = 0
    checked = 0
    for folder in ALLOWED:
        base = os.path.join(root, folder)
        if not os.path.isdir(base):
            print(f"missing folder: {folder}")
            bad += 1
            continue
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if not SOURCE.match(name):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = folder_of(m.group(1))
                        if target not in known and target not in ("tests", "experiments", "examples"):
                            continue  # a system or generated header (gen-cpp/, ...)
                        checked += 1
                        if target == folder or target in ALLOWED[folder]:
                            continue
                        may = ", ".join(ALLOWED[folder]) or "nothing"
                        print(f"{rel}:{number}: includes {line.strip()[len('#include '):]} "
                              f"but {folder}/ may include only {may}")
                        bad += 1
    # Every top-level source folder of the product must be in the table.
    for entry in sorted(os.listdir(root)):
        full = os.path.join(root, entry)
        if (os.path.isdir(full) and entry not in known and entry not in
                ("tests", "experiments", "examples", "docs", "scripts", "deploy", "python", "build", ".git", ".ci")
                and not entry.startswith(".") and not entry.startswith("build")):
            has_sources = any(SOURCE.match(n) for _, _, ns in os.walk(full) for n in ns)
            if has_sources:
                print(f"{entry}/ holds sources but is not in the include table of tests/include_graph.py")
                bad += 1
    if bad:
        print(f"{bad} include(s) against the one-way dependencies")
        return 1
    print(f"checked {checked} project includes: every dependency runs one way, nothing includes cli/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
