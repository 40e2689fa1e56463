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
    # The program's code is compiled from source, but start-up compiled nothing (the hooks come
    # with their bytecode), so the compiler's pages would be faulted in during the program's
    # run (~1.3 ms measured): compile something now, as a cold start's site would have.
    # An image's older Python may not parse all of it, nor have gc.freeze (3.7): the warm start
    # must not fail for a speed-up.
    try:
        compile(_SAMPLE, "<llmbox-warm>", "exec")
    except SyntaxError:
        pass
    # What start-up allocated is collected now and the rest frozen out of the collector's way
    # (gc.freeze: never traversed again), so the program's collections do not walk it.
    import gc
    gc.collect()
    if hasattr(gc, "freeze"):
        gc.freeze()


# A little of most of the grammar, so most of the parser and compiler is touched.
_SAMPLE = r'''
import os, sys
def f(a, *b, c=1, **d):
    "doc"
    x = [i * 2 for i in range(10) if i % 2] + list({1: 2}.items())
    with open(os.devnull) as g:
        try:
            y = f"{a!r:>10} {b}" if a else lambda z: z ** 2
        except (ValueError, KeyError) as e:
            raise RuntimeError("x") from e
        finally:
            pass
    async def h():
        await g
    return sorted(x, key=lambda t: -t[0] if isinstance(t, tuple) else t)
class C(object):
    @property
    def p(self):
        return {k: v for k, v in zip("ab", (1, 2))}
while True:
    break
print(f(1), file=sys.stderr)
'''


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
