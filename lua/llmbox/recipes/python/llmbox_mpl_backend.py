"""llmbox's matplotlib backend (MPLBACKEND=module://llmbox_mpl_backend).

Agg, plus: every figure that is shown, saved, or still open when the program ends is also written
to $LLMBOX_PLOTS_DIR, where llmbox collects it after the run. Loaded by matplotlib only when the
program uses matplotlib (seaborn included), so it costs nothing otherwise, and the user's code is
not changed, so traceback line numbers stay right.

One plot per figure as it looks: a figure saved and then shown, or saved again, without a change
in between, is one plot, and that plot is what the last savefig wrote: its dpi, bbox_inches,
pad_inches and colours; SVG stays SVG, any other format (PDF, JPEG, ...) comes back as PNG. A
figure changed after it was captured is captured again, as a new plot.
"""
import atexit
import functools
import os
import time

from matplotlib import _pylab_helpers, rcParams
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_DIR = os.environ.get("LLMBOX_PLOTS_DIR", "/tmp/llmbox/plots")
_saving = False

# print_figure's parameters that shape the picture, in its positional order, and the keyword-only
# ones; format-specific options (metadata, pil_kwargs) are not carried over to the capture.
_POSITIONAL = ("dpi", "facecolor", "edgecolor", "orientation", "format")
_KEPT = ("dpi", "facecolor", "edgecolor", "orientation", "bbox_inches", "pad_inches",
         "bbox_extra_artists")


def _capture(figure, options=None, replace=False, written=None):
    """Writes `figure` as a plot. Names sort in creation order across plotting libraries; with
    `replace`, the figure's previous plot is rewritten in its place. `written`: a file savefig
    just wrote with these options, in this format: copied instead of drawing the figure again."""
    global _saving
    if _saving:
        return
    _saving = True
    try:
        options = dict(options or {})
        fmt = options.pop("format", "png")
        os.makedirs(_DIR, exist_ok=True)
        previous = getattr(figure, "_llmbox_plot", None)
        if replace and previous:
            stem = previous.rsplit(".", 1)[0]
        else:
            stem = os.path.join(_DIR, "%020d" % time.monotonic_ns())
        path = "%s.%s" % (stem, fmt)
        if not _copy(written, path):
            figure.canvas.print_figure(path, format=fmt, **options)
        if replace and previous and previous != path:
            os.unlink(previous)
        figure._llmbox_plot = path
    except Exception:  # a plot that cannot be drawn must not change the program's outcome
        pass
    finally:
        _saving = False


def _copy(written, path):
    """Copies the file savefig wrote as the plot; False when there is none to copy: only a regular
    file is read (savefig("/dev/stdout") must not make llmbox read the program's own pipe)."""
    if written is None or not os.path.isfile(written):
        return False
    import shutil

    try:
        shutil.copyfile(written, path)
    except OSError:
        return False
    return True


def _save_options(filename, args, kwargs):
    """print_figure's arguments -> the capture's: the same picture, as PNG unless it is SVG; and
    the file savefig wrote when it is that picture already (a path, in PNG or SVG), else None."""
    given = dict(zip(_POSITIONAL, args))
    given.update(kwargs)
    fmt = given.get("format")
    if isinstance(filename, os.PathLike):
        filename = os.fspath(filename)
    if fmt is None:
        ext = os.path.splitext(filename)[1][1:] if isinstance(filename, str) else ""
        fmt = ext or rcParams["savefig.format"]
    options = {k: given[k] for k in _KEPT if given.get(k) is not None}
    options["format"] = "svg" if str(fmt).lower() == "svg" else "png"
    same = isinstance(filename, str) and str(fmt).lower() == options["format"]
    return options, filename if same else None


class FigureCanvasLlmbox(FigureCanvasAgg):
    def draw_idle(self, *args, **kwargs):
        # "Redraw when control returns to the event loop": there is no screen and no event loop,
        # so there is nothing to redraw for. Agg's draws at once, which made every
        # pyplot.savefig draw the figure a second time (and every change under plt.ion() draw
        # it); draw(), savefig and the captures still draw in full.
        pass

    def print_figure(self, filename, *args, **kwargs):
        result = super().print_figure(filename, *args, **kwargs)
        if not _saving:  # savefig(...) by the program: keep what it wrote
            figure = self.figure
            options, written = _save_options(filename, args, kwargs)
            _capture(figure, options, replace=getattr(figure, "_llmbox_unchanged", False), written=written)
        return result


FigureCanvas = FigureCanvasLlmbox
FigureManager = FigureManagerBase

_figure_savefig = Figure.savefig


@functools.wraps(_figure_savefig)
def _savefig(self, *args, **kwargs):
    # Whether the figure changed since its last capture must be read before savefig runs: savefig
    # itself marks the figure stale (it sets and restores colours around the drawing).
    ours = isinstance(self.canvas, FigureCanvasLlmbox)
    if ours:
        self._llmbox_unchanged = bool(getattr(self, "_llmbox_plot", None)) and not self.stale
    try:
        return _figure_savefig(self, *args, **kwargs)
    finally:
        if ours:
            self._llmbox_unchanged = False
            if getattr(self, "_llmbox_plot", None):
                # as captured: any later change to the figure or its artists marks it stale again
                self.stale = False


Figure.savefig = _savefig


def _needs_capture(figure):
    return not getattr(figure, "_llmbox_plot", None) or figure.stale


def show(*args, **kwargs):
    for manager in _pylab_helpers.Gcf.get_all_fig_managers():
        if _needs_capture(manager.canvas.figure):
            _capture(manager.canvas.figure)
    # as with a window closed after a blocking show() (or Jupyter's inline backend): the shown
    # figures are done, so a second show() does not return the same plots again
    _pylab_helpers.Gcf.destroy_all()


@atexit.register
def _figures_left_open():
    for manager in _pylab_helpers.Gcf.get_all_fig_managers():
        if _needs_capture(manager.canvas.figure):
            _capture(manager.canvas.figure)
