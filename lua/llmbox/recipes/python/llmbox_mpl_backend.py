"""llmbox's matplotlib backend (MPLBACKEND=module://llmbox_mpl_backend).

Agg, plus: every figure that is shown, saved, or still open when the program ends is also written
as a PNG to $LLMBOX_PLOTS_DIR, where llmbox collects it after the run. Loaded by matplotlib only
when the program uses matplotlib (seaborn included), so it costs nothing otherwise, and the
user's code is not changed, so traceback line numbers stay right.
"""
import atexit
import os
import time

from matplotlib import _pylab_helpers
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

_DIR = os.environ.get("LLMBOX_PLOTS_DIR", "/tmp/llmbox/plots")
_saving = False


def _capture(figure):
    """Writes one PNG of `figure`; names sort in creation order across plotting libraries."""
    global _saving
    if _saving:
        return
    _saving = True
    try:
        os.makedirs(_DIR, exist_ok=True)
        path = os.path.join(_DIR, "%020d.png" % time.monotonic_ns())
        figure.savefig(path, format="png")
        figure._llmbox_captured = True
    except Exception:  # a plot that cannot be drawn must not change the program's outcome
        pass
    finally:
        _saving = False


class FigureCanvasLlmbox(FigureCanvasAgg):
    def print_figure(self, *args, **kwargs):
        result = super().print_figure(*args, **kwargs)
        _capture(self.figure)  # savefig(...) by the program: keep a copy too
        return result


FigureCanvas = FigureCanvasLlmbox
FigureManager = FigureManagerBase


def show(*args, **kwargs):
    for manager in _pylab_helpers.Gcf.get_all_fig_managers():
        _capture(manager.canvas.figure)
    # as with a window closed after a blocking show() (or Jupyter's inline backend): the shown
    # figures are done, so a second show() does not return the same plots again
    _pylab_helpers.Gcf.destroy_all()


@atexit.register
def _figures_left_open():
    for manager in _pylab_helpers.Gcf.get_all_fig_managers():
        if not getattr(manager.canvas.figure, "_llmbox_captured", False):
            _capture(manager.canvas.figure)
