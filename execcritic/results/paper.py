"""The paper's reported numbers as a tidy DataFrame, every row labeled `kind="reported"`.

Source: `results/paper/reported_numbers.json`, a verbatim copy of the transcription in
`shared/paper/reported_numbers.json` (its `_source` says where the numbers come from). Nothing measured
is ever written into that file or into this frame. Condition columns use the same names and labels as the
artifact schemas (`execcritic.results.schemas`), so measured summaries join on (artifact, condition, metric).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from execcritic.errors import InputError
from execcritic.results.schemas import SCHEMAS

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "results" / "paper" / "reported_numbers.json"
KIND = "reported"
COLUMNS = ("artifact", "condition", "metric", "value", "unit", "kind", "source", "note")

Row = tuple[str, dict[str, Any], str, float, str, str, str]   # artifact, fields, metric, value, unit, path, note


def _table1(d: dict) -> Iterator[Row]:
    for label, v in d["rows"].items():
        yield "table1", {"test_source": label}, "b2g_pct", v, "pct", f"rows/{label}", ""


def _table2(d: dict) -> Iterator[Row]:
    for key, agent in (("base_repair", "base"), ("trained_repair", "trained")):
        for label, v in d[key].items():
            yield "table2", {"repair_agent": agent, "test_source": label}, "resolved_pct", v, "pct", f"{key}/{label}", ""


def _round0_final(artifact: str, column: str) -> Callable[[dict], Iterator[Row]]:
    def parse(d: dict) -> Iterator[Row]:
        for label, vals in d["rows"].items():
            fields = {column: label, "test_source": "RL-35B"}
            yield artifact, fields, "round0_resolved_pct", vals["round0"], "pct", f"rows/{label}/round0", ""
            yield artifact, fields, "resolved_pct", vals["final"], "pct", f"rows/{label}/final", ""
    return parse


def _table4(d: dict) -> Iterator[Row]:
    for label, vals in d["rows"].items():
        for stage in ("sft", "sft_rl"):
            yield "table4", {"teacher": label, "stage": stage}, "b2g_pct", vals[stage], "pct", f"rows/{label}/{stage}", ""


def _table5(d: dict) -> Iterator[Row]:
    for label, v in d["rows"].items():
        yield "table5", {"language": label}, "b2g_pct", v, "pct", f"rows/{label}", ""


def _figure5a(d: dict) -> Iterator[Row]:
    for bench in ("SWE-bench Verified", "SWE-bench Pro"):
        for label, v in d[bench].items():
            fields = {"panel": "a", "benchmark": bench, "repair_agent": "GPT-5.6-sol", "feedback_source": label}
            yield "figure5", fields, "resolved_pct", v, "pct", f"{bench}/{label}", ""


def _figure5b(d: dict) -> Iterator[Row]:
    for label, v in d["rows"].items():
        fields = {"panel": "b", "benchmark": "SWE-bench Verified", "repair_agent": "Qwen3.5-35B-A3B",
                  "feedback_source": label}
        yield "figure5", fields, "resolved_pct", v, "pct", f"rows/{label}", ""


def _figure6a(d: dict) -> Iterator[Row]:
    note = "approximate, read from the paper's text (the paper gives fractions)"
    for n, v in d["points"].items():
        yield ("figure6", {"checkpoint": "sft", "sft_trajectories": int(n)}, "b2g_pct", round(100 * v, 4), "pct",
               f"points/{n}", note)
    yield ("figure6", {"checkpoint": "teacher", "sft_trajectories": 0}, "b2g_pct",
           round(100 * d["teacher_reference"], 4), "pct", "teacher_reference", note)
    yield ("figure6", {"checkpoint": "sft_rl", "sft_trajectories": 5000}, "b2g_pct",
           round(100 * d["rl_from_5k_checkpoint"], 4), "pct", "rl_from_5k_checkpoint", note)


def _revision_turns(d: dict) -> Iterator[Row]:
    fields = {"population": d["population"]}
    for k, unit in (("mean_additional_turns", "turns"), ("median", "turns"), ("p75", "turns"), ("p90", "turns"),
                    ("share_at_most_5_turns", "pct"), ("share_at_most_10_turns", "pct")):
        yield "revision_turns", fields, k, d[k], unit, k, ""


def _f2p(d: dict) -> Iterator[Row]:
    for bench, vals in d.items():
        for k, v in vals.items():
            yield "benchmark_f2p", {"benchmark": bench}, k, v, "count", f"{bench}/{k}", ""


def _qualitative(d: dict) -> Iterator[Row]:
    return iter(())   # only a description in the paper: see reported_notes()


PARSERS: dict[str, Callable[[dict], Iterator[Row]]] = {
    "table1_test_agent_base_to_gold": _table1,
    "table2_resolved_by_repair_agent_and_test_source": _table2,
    "table3_repair_objective_ablation": _round0_final("table3", "objective"),
    "table4_sft_teacher_comparison": _table4,
    "table5_cross_language_base_to_gold": _table5,
    "table6_repair_training_feedback_source": _round0_final("table6", "training_feedback"),
    "figure5a_gpt56_feedback": _figure5a,
    "figure5b_qwen_feedback": _figure5b,
    "figure6a_sft_data_scaling": _figure6a,
    "figure6b_test_rl_reward_curves": _qualitative,
    "figure6c_repair_rl_reward_curve": _qualitative,
    "revision_turns": _revision_turns,
    "benchmark_f2p_statistics": _f2p,
}


def load_json(path: str | Path | None = None) -> dict[str, Any]:
    path = Path(path) if path else DEFAULT_PATH
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("the paper's reported numbers are missing", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg}, line {exc.lineno})", file=str(path)) from None
    if "_source" not in data:
        raise InputError("reported numbers must keep their `_source`", file=str(path), field="_source")
    unknown = sorted(k for k in data if k != "_source" and k not in PARSERS)
    if unknown:
        raise InputError(f"no parser for reported-number keys {unknown}; add one in execcritic/results/paper.py",
                         file=str(path), field=unknown[0])
    return data


def reported(path: str | Path | None = None) -> pd.DataFrame:
    """Every reported number, one row each: artifact, condition (the schema's condition label), metric,
    value, unit, kind="reported", source (file#key/path), note, plus the condition's columns."""
    path = Path(path) if path else DEFAULT_PATH
    data = load_json(path)
    rows = []
    for key, parse in PARSERS.items():
        if key not in data:
            continue
        try:
            for artifact, fields, metric, value, unit, sub, note in parse(data[key]):
                sch = SCHEMAS.get(artifact)
                cond = sch.condition_label(fields) if sch else " / ".join(str(v) for v in fields.values())
                rows.append({"artifact": artifact, "condition": cond, "metric": metric, "value": float(value),
                             "unit": unit, "kind": KIND, "source": f"{path.name}#{key}/{sub}", "note": note,
                             **fields})
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"unexpected shape under {key!r} ({exc!r})", file=str(path), field=key) from None
    df = pd.DataFrame(rows)
    front = list(COLUMNS)
    df = df[front + [c for c in df.columns if c not in front]]
    df.attrs["_source"] = data["_source"]
    df.attrs["path"] = str(path)
    return df


def reported_notes(path: str | Path | None = None) -> dict[str, str]:
    """The `metric` text of every reported-number entry (what the paper measured, in its words);
    the only content of entries the paper gives qualitatively (Figure 6b, 6c)."""
    data = load_json(path)
    return {k: v.get("metric", "") for k, v in data.items() if k != "_source" and isinstance(v, dict)}


__all__ = ["DEFAULT_PATH", "KIND", "PARSERS", "load_json", "reported", "reported_notes"]
