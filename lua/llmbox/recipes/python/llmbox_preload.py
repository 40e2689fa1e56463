"""A pool's `preload` for llmbox's prestarted interpreters (llmbox_warm.py, llmbox_kernel.py):
imports the modules named after --preload in sys.argv, before the interpreter says it is ready,
and drops the arguments (a cold start has none). A module that fails to import is left for the
program's own import to fail the same way (the pool checked them all when it was made)."""
import sys


def preload():
    names = sys.argv[2:] if sys.argv[1:2] == ["--preload"] else []
    del sys.argv[1:]
    if names:
        import importlib
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:
                pass
    del sys.modules[__name__]  # not a module the program imported
