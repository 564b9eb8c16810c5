"""paper_figures/: every paper table and figure rebuilt from results/, reported beside measured."""

from execcritic.figures.build import BuildReport, build_all

__all__ = ["BuildReport", "build_all"]
