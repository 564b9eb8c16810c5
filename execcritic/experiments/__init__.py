"""Per-artifact logic for the paper's tables and figures: presets, parameter checks, and one module per
artifact (table1 ... figure6) whose `run(params)` launches the evaluation through the pipeline and
writes its results through the results store. The notebooks in notebooks/ are thin shells over these."""

from execcritic.experiments.artifacts import MODULES, SPECS
from execcritic.experiments.keep import keep_notebook
from execcritic.experiments.params import Params, parameters
from execcritic.experiments.presets import load_preset, preset_names


def run(params: Params, *, show_progress: bool = True):
    """Run (or, with `reuse`, load) the artifact `params` were checked for."""
    return MODULES[params.artifact].run(params, show_progress=show_progress)


__all__ = ["MODULES", "SPECS", "Params", "keep_notebook", "load_preset", "parameters", "preset_names", "run"]
