"""llmbox's Python startup hook: makes Plotly's fig.show() write the figure as HTML to
$LLMBOX_PLOTS_DIR. It only watches for `plotly.io` being imported (no import of its own), so a
program that does not use Plotly pays nothing. Matplotlib is handled by llmbox_mpl_backend.

The HTML loads plotly.js from Plotly's CDN: Debian's copy of the script is 8.6 MB (unminified),
which embedded in every plot would swamp JSON and MCP results (see README, "Plots"). `llmbox
run --save-plots` points saved plots at a local copy instead; LLMBOX_PLOTLY_JS=inline embeds it."""
import importlib.machinery  # already loaded by site; importlib.abc would cost ~10 ms
import os
import sys
import time

_DIR = os.environ.get("LLMBOX_PLOTS_DIR", "/tmp/llmbox/plots")


def _register_renderer(pio):
    from plotly.io._base_renderers import ExternalRenderer

    class LlmboxRenderer(ExternalRenderer):
        def render(self, fig_dict):
            os.makedirs(_DIR, exist_ok=True)
            inline = os.environ.get("LLMBOX_PLOTLY_JS") == "inline"
            html = pio.to_html(fig_dict, include_plotlyjs=True if inline else "cdn", full_html=True)
            path = os.path.join(_DIR, "%020d.html" % time.monotonic_ns())
            with open(path, "w", encoding="utf-8") as f:
                f.write(html)

    pio.renderers["llmbox"] = LlmboxRenderer()
    pio.renderers.default = "llmbox"


class _PlotlyWatcher:  # a meta path finder needs only find_spec
    def find_spec(self, name, path=None, target=None):
        if name != "plotly.io":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            try:
                _register_renderer(module)
            except Exception:
                pass

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("LLMBOX_PLOTS_DIR"):
    sys.meta_path.insert(0, _PlotlyWatcher())
