"""experiments/training/extrapolate_cost.py: its measured inputs are recomputed from the committed CPU smoke files
(never typed in), its assumptions are flags, and the output is labeled an extrapolation."""

from __future__ import annotations

import importlib.util
import json
import statistics

import pytest

from tests.synthetic_results import REPO

SCRIPT = REPO / "experiments" / "training" / "extrapolate_cost.py"
RESULTS = REPO / "results"


@pytest.fixture(scope="module")
def mod():
    if not (RESULTS / "training" / "cpu-smoke-throughput.json").is_file():
        pytest.skip("no committed throughput measurement")
    spec = importlib.util.spec_from_file_location("extrapolate_cost", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_measured_inputs_are_the_committed_files(mod):
    m = mod.measured(RESULTS)
    tp = json.loads((RESULTS / "training" / "cpu-smoke-throughput.json").read_text())
    one = min(tp["runs"], key=lambda r: r["workers"])
    eps = one["episodes_detail"]
    assert m["generation_tokens_per_s_per_worker"]["value"] == pytest.approx(
        sum(e["model_tokens"] for e in eps) / sum(e["generate_s"] for e in eps), abs=0.01)
    assert m["episode_setup_s"]["value"] == pytest.approx(
        (one["wall_s"] - sum(e["generate_s"] for e in eps)) / len(eps), abs=0.01)
    cands = [json.loads(x) for x in (RESULTS / "candidates" / "cpu-smoke-sympy" / "candidates.jsonl").read_text().splitlines()]
    runs = [c["official"]["duration_s"] for c in cands if c["official"]["valid"] and not c["official"]["timed_out"]]
    assert m["test_execution_s"]["value"] == pytest.approx(statistics.median(runs), abs=0.01)
    sft = json.loads((RESULTS / "sft" / "cpu-smoke-sft-smollm2.json").read_text())
    assert m["sft_peak_rss_mb"]["value"] == sft["peak_rss_mb"]
    assert all(v["source"] for v in m.values())


def test_output_is_labeled_and_assumptions_are_flags(mod, tmp_path):
    out = tmp_path / "x.json"
    assert mod.main(["--out", str(out), "--sandbox-cores", "128"]) == 0
    d = json.loads(out.read_text())
    assert d["label"].startswith("EXTRAPOLATION") and d["assumptions"]["sandbox_cores"] == 128
    assert d["manifest"]["artifact"] == "training-extrapolation" and d["manifest"]["git"]["sha"]
    base = json.loads((RESULTS / "training" / "cpu-smoke-extrapolation.json").read_text())
    if base["assumptions"]["sandbox_cores"] == 64:
        assert d["settings"]["gpu-8"]["test"]["sandbox_s"] == pytest.approx(
            base["settings"]["gpu-8"]["test"]["sandbox_s"] / 2, abs=1)
    assert d["recipe"]["test_steps"] == 200 and d["recipe"]["repair_steps"] == 100
    assert d["settings"]["gpu-8"]["test"]["rollouts_per_step"] == 16 * 8 * d["assumptions"]["oversampling"]
