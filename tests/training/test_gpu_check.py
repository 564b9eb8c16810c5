"""experiments/gpu_check.py as far as a CPU allows: the dry run prepares and validates without measuring, and a
non-dry run on a machine without CUDA says it did not run (exit 2) instead of reporting numbers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.paths import VERIFIED, needs_rows

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_dry_run_prepares_without_measuring(tiny_model_dir, tmp_path):
    pytest.importorskip("trl")
    gc = _module()
    out = tmp_path / "gpu_check.json"
    assert gc.main(["--dry-run", "--model-dir", str(tiny_model_dir), "--out", str(out),
                    "--work-dir", str(tmp_path / "w")]) == 0
    report = json.loads(out.read_text())
    assert report["ran"] is False and report["dry_run"] is True and "nothing was measured" in report["note"]
    assert "results" not in report and "error" not in report
    args = report["trl_args"]
    assert args["use_vllm"] is True and args["vllm_mode"] == "colocate" and args["num_generations"] == 8
    assert (args["epsilon"], args["epsilon_high"], args["beta"], args["scale_rewards"]) == (0.2, 0.28, 0.0, "none")
    if importlib.util.find_spec("verl"):
        assert set(report["verl_launch_files"]) == {"test", "repair"}


def test_gpu_check_without_cuda_says_it_did_not_run(tiny_model_dir, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: this test is about machines without one")
    gc = _module()
    out = tmp_path / "gpu_check.json"
    assert gc.main(["--model-dir", str(tiny_model_dir), "--out", str(out), "--work-dir", str(tmp_path / "w")]) == 2
    report = json.loads(out.read_text())
    assert report["ran"] is False and report["not_run"] == "no CUDA device" and "results" not in report


@needs_rows
def test_gpu_learning_curve_recipe_dry_run_plans_without_measuring(tmp_path, monkeypatch, capsys):
    """`--recipe learning-curve`: the CPU study's recipe at the gpu-curve size; the dry run validates the profile and
    the study script and lists the commands a GPU machine would run - it measures nothing. With the task
    environments missing (an empty cache here) it fails: exit 1 and one line naming every missing one (it exited 0
    before, so a GPU session started a run that could not work)."""
    monkeypatch.setenv("EXECCRITIC_VERIFIED", str(VERIFIED))   # the rows the suite reads, as `make test` exports
    monkeypatch.setenv("EXECCRITIC_CACHE", str(tmp_path / "empty-cache"))   # no task environment built
    gc = _module()
    out = tmp_path / "gpu_check.json"
    assert gc.main(["--recipe", "learning-curve", "--dry-run", "--out", str(out)]) == 1
    report = json.loads(out.read_text())
    lc = report["learning_curve"]
    said = capsys.readouterr()
    assert said.out == "" and len(said.err.strip().splitlines()) == 1
    assert lc["environments_missing"] == lc["instances"] and all(i in said.err for i in lc["instances"])
    assert report["ran"] is False and "nothing was measured" in report["note"] and "results" not in report
    assert lc["profile"] == "gpu-curve" and lc["batch_shape"]["repair"]["num_generations"] == 8
    assert "psf__requests-2931" in lc["instances"] and lc["commands"][0].endswith("learning_curve.sh all")
    assert "grpo.rollouts_per_group" not in lc["deviations"] and lc["deviations"]["grpo.groups_per_step"] == [16, 2]
