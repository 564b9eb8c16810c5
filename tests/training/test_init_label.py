"""What a training run says it starts from (`init`, Figure 6b's "from Base / from SFT"): derived from --model,
overridable with --init, and carried by every checkpoint this CLI writes (`execcritic-training.json`)."""

from __future__ import annotations

import json

import pytest

from execcritic.errors import InputError
from execcritic.training.run import TRAINING_META, TrainRun, init_label


def _run(model: str, init: str | None = None) -> TrainRun:
    return TrainRun(kind="test-rl", preset="unit", model=model, run_id="r", init=init)


def test_an_embedded_base_alias_is_base_and_init_overrides(tmp_path):
    assert init_label(_run("smollm2")) == "base" and init_label(_run("tiny")) == "base"
    assert init_label(_run("smollm2", init="sft")) == "sft"
    assert init_label(_run(str(tmp_path))) == "checkpoint"          # a foreign HF dir: not guessed


def test_a_checkpoint_of_this_cli_says_what_wrote_it(tmp_path):
    (tmp_path / TRAINING_META).write_text(json.dumps({"kind": "sft", "run_id": "s"}))
    assert init_label(_run(str(tmp_path))) == "sft"
    (tmp_path / TRAINING_META).write_text(json.dumps({"run_id": "s"}))
    with pytest.raises(InputError) as e:
        init_label(_run(str(tmp_path)))
    assert e.value.file == str(tmp_path / TRAINING_META) and e.value.field == "kind"
