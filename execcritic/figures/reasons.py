"""The "not run here: <reason>" registry lives in `execcritic.results.reasons` (one layer down, so the
experiments that decide what cannot run and the figures that show it read the same words)."""

from execcritic.results.reasons import CURVES, REASONS, not_run, not_run_curve, reason_ids

__all__ = ["CURVES", "REASONS", "not_run", "not_run_curve", "reason_ids"]
