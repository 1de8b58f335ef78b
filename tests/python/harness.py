# SPDX-License-Identifier: Apache-2.0
# harness.py - a tiny test runner for the Python tests (no pytest needed): skip code 77, checks, summary.
"""Shared by tests/python/test_*.py, run by ctest with Debian's /usr/bin/python3.

ctest sets TERNJIT_LIBRARY (the build's libternjit.so) and PYTHONPATH (python/). Run one
by hand: ``TERNJIT_LIBRARY=build/lib/libternjit.so PYTHONPATH=python /usr/bin/python3
tests/python/test_binding.py [name-substring]``.
"""

import os
import sys
import traceback

#: ctest's SKIP_RETURN_CODE for these tests.
SKIP = 77

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def require(module_name, why):
    """Imports a module or exits with SKIP, printing the reason."""
    try:
        return __import__(module_name)
    except ImportError as e:
        print("SKIP: %s is missing (%s): %s" % (module_name, why, e))
        sys.exit(SKIP)


def import_ternjit():
    """Imports the package from the source tree (PYTHONPATH wins) and loads the library.

    A library that does not load is a failure, not a skip: it is part of this build.
    """
    sys.path.append(os.path.join(SOURCE_DIR, "python"))
    import ternjit
    try:
        print("libternjit: %s (version %s, ABI %d)" % (ternjit.library_path(), ternjit.version(),
                                                       ternjit.abi_version()))
    except ternjit.Error as e:
        print("FAIL: %s" % e)
        sys.exit(1)
    return ternjit


def import_ternjit_torch():
    """Imports ternjit.torch (after import_ternjit()). Its extension not built (no
    TERNJIT_TORCH_LIBRARY: the build's Python had no torch when configured) is a skip; set
    but failing to load is a failure."""
    import ternjit
    try:
        import ternjit.torch
    except ternjit.Error as e:
        print("%s: %s" % ("FAIL" if os.environ.get("TERNJIT_TORCH_LIBRARY") else "SKIP", e))
        sys.exit(1 if os.environ.get("TERNJIT_TORCH_LIBRARY") else SKIP)
    print("ternjit.torch: %s" % ternjit.torch.extension_path())
    return ternjit.torch


class Failure(AssertionError):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def run(tests):
    """Runs the test functions (filtered by argv[1] as a substring); exit status 0 or 1."""
    wanted = sys.argv[1] if len(sys.argv) > 1 else ""
    failed = 0
    ran = 0
    for test in tests:
        if wanted not in test.__name__:
            continue
        ran += 1
        try:
            test()
            print("ok    %s" % test.__name__)
        except Exception:  # report every failure, then carry on with the next test
            failed += 1
            print("FAIL  %s" % test.__name__)
            traceback.print_exc(file=sys.stdout)
    print("%d tests, %d failed" % (ran, failed))
    sys.stdout.flush()
    sys.exit(1 if failed or ran == 0 else 0)
