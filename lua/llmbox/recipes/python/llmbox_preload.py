"""A pool's `preload` for llmbox's prestarted interpreters (llmbox_warm.py, llmbox_kernel.py):
imports the modules named after --preload in sys.argv, before the interpreter says it is ready,
and drops the arguments (a cold start has none). A module that fails to import is left for the
program's own import to fail the same way (the pool checked them all when it was made).

A preloaded matplotlib also draws throwaway figures in memory, so that its renderer, fonts, text
layout and PNG writer are loaded before the first lease: an import alone leaves most of a first
plot's time to the lease. The figures never reach pyplot (no figure is open afterwards) and
nothing is written to disk; what stays is what any first plot would have loaded anyway."""
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
        if "matplotlib" in sys.modules:
            _warm_matplotlib()
    del sys.modules[__name__]  # not a module the program imported


def _warm_matplotlib():
    try:
        import io
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        for _ in range(2):  # the second draw reaches what the first one cached
            fig = Figure()
            FigureCanvasAgg(fig)
            ax = fig.add_subplot()
            ax.plot([0, 1, 2], [0, 1, 0], label="warm")
            ax.set_title("warm")
            ax.legend()
            fig.savefig(io.BytesIO(), format="png")
    except Exception:
        pass  # a first plot will load what it needs, as in a cold start
