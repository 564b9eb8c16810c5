"""The record schemas of every paper artifact, in one visible place.

A run of an artifact (`results/<artifact>/<run_id>/`) holds one JSON object per instance x condition x
run (`records.jsonl`; training runs: one per optimizer step in `metrics.jsonl`). The columns below are
what the paper's aggregations need, so every number in a table can be recomputed from the records:

* Base-to-Gold artifacts (Table 1, 4, 5, Figure 6a): one Test-generation episode per issue and Test
  source, audited on Base and on Gold. Q = B*G; an operationally invalid Base or Gold run counts as 0
  and is also reported separately (`base_valid`/`gold_valid`); an instance without a qualified bundle
  stays in the denominator (`miss="no_bundle"`).
* Resolution artifacts (Table 2, 3, 6, Figure 5): one Repair run per instance x condition x run (the
  paper uses 3 runs reusing one bundle). `resolved` is the fresh official evaluation of the terminal
  patch; an invalid or missing official score is unresolved and is reported separately
  (`official_valid`). The local gate outcome (`local_status`) is recorded apart from it.
* Training curves (Figure 6b, 6c): `results/training/<run_id>/metrics.jsonl`, one row per GRPO step.

Condition values use the paper's labels (those of `reported_numbers.json`) so measured and reported rows
line up; a measured condition the paper does not have is shown as measured-only. `aliases` maps the
pipeline's own labels (`none`, `oracle`) onto the paper's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from execcritic.errors import InputError

DTYPES = ("str", "int", "float", "bool", "binary")

# A condition run with another model than the paper's (the CPU smoke model, a scripted policy) keeps the
# paper's label for the role it plays and names the model: "base [stand-in: SmolLM2-135M-Instruct]". It
# never takes the paper's own label, so a stand-in value is never shown as a measurement of the paper's
# condition; it sorts right after that condition and its paper part is checked against `choices`.
STAND_IN = " [stand-in: "


def stand_in(label: str, name: str) -> str:
    """The label of the paper condition `label` played by the stand-in model `name`."""
    return f"{label}{STAND_IN}{name}]"


def paper_part(label: Any) -> Any:
    """`label` without its stand-in suffix (non-strings unchanged)."""
    if isinstance(label, str) and label.endswith("]") and STAND_IN in label:
        return label[:label.index(STAND_IN)]
    return label


def stand_in_name(label: Any) -> str | None:
    """The stand-in model named in `label`, or None for a paper condition."""
    if isinstance(label, str) and label.endswith("]") and STAND_IN in label:
        return label[label.index(STAND_IN) + len(STAND_IN):-1]
    return None


def order_key(order: tuple[Any, ...], value: Any) -> tuple:
    """Sort key of a condition value: the paper's order, a stand-in right after its paper condition,
    values the paper does not have last (numbers by value, then text)."""
    base = paper_part(value)
    if base in order:
        return (order.index(base), 0 if value == base else 1, 0, str(value))
    return (len(order), 0, value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0,
            str(value))


@dataclass(frozen=True)
class Col:
    """One record column. `binary` is an int that must be 0 or 1 (B, G, Q)."""

    name: str
    dtype: str
    required: bool = True
    nullable: bool = False
    choices: tuple[Any, ...] | None = None
    doc: str = ""


@dataclass(frozen=True)
class Metric:
    """A summary metric: the mean of a 0/1 `outcome` column over all instances (x runs), in percent.
    Records whose `valid` columns are False are operationally invalid: counted as 0 and reported."""

    name: str
    label: str
    outcome: str
    valid: tuple[str, ...] = ()


@dataclass(frozen=True)
class Contrast:
    """A paired Δ (percentage points) computed from per-instance outcomes of one run.

    vary="metric": `treatments` metrics minus the `baseline` metric within each condition (e.g. final
    minus Round 0). Otherwise `vary` is a condition column: each treatment value minus the baseline value,
    within every combination of the other condition columns, for `metrics` (empty: all)."""

    vary: str
    baseline: Any
    treatments: tuple[Any, ...] = ()     # empty: every other value present in the run
    metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArtifactSchema:
    artifact: str
    title: str
    kind: str                                     # "instance" | "curve"
    columns: tuple[Col, ...]
    condition: tuple[str, ...] = ()
    metrics: tuple[Metric, ...] = ()
    contrasts: tuple[Contrast, ...] = ()
    order: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)     # the paper's row order
    aliases: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    prefix_columns: tuple[Col, ...] = ()          # e.g. level_* histogram columns (name = prefix)
    manifest_keys: tuple[str, ...] = ()           # extra manifest keys this artifact requires
    checks: tuple[Callable[[dict[str, Any]], str | None], ...] = ()   # cross-field: message or None
    records_file: str = "records.jsonl"

    @property
    def key_columns(self) -> tuple[str, ...]:
        """What identifies one record: a second record with the same key is a duplicate."""
        if self.kind == "curve":
            return ("step",)
        return ("instance_id", *self.condition, "run")

    def column(self, name: str) -> Col | None:
        for c in self.columns:
            if c.name == name:
                return c
        for c in self.prefix_columns:
            if name.startswith(c.name):
                return c
        return None

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.required)

    def metric(self, name: str) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"{self.artifact} has no metric {name!r}")

    def canonical(self, column: str, value: Any) -> Any:
        return self.aliases.get(column, {}).get(value, value) if isinstance(value, str) else value

    def condition_label(self, row: Mapping[str, Any]) -> str:
        """The human key of a condition (also the join key between measured and reported rows)."""
        return " / ".join(str(row[c]) for c in self.condition)


# ---- shared column groups ----------------------------------------------------------------------------

_ID = (Col("instance_id", "str", doc="benchmark instance id"),
       Col("run", "int", doc="0-based run index (B2G: the generation episode; resolution: the Repair run)"))
_USAGE = (Col("tokens_prompt", "int", required=False, nullable=True),
          Col("tokens_completion", "int", required=False, nullable=True),
          Col("cost_usd", "float", required=False, nullable=True),
          Col("duration_s", "float", required=False, nullable=True),
          Col("repo", "str", required=False, nullable=True))

MISS_KINDS = ("", "no_bundle", "base_invalid", "base_passed", "gold_invalid", "gold_failed")

B2G_COLUMNS = _ID + (
    Col("model", "str", doc="the Test model spec actually used (e.g. openai:...#Qwen3.5-35B-A3B, local, oracle)"),
    Col("qualified", "bool", doc="a submission failed cleanly on Base and was retained"),
    Col("B", "binary", doc="clean failure on a fresh Base (invalid run: 0)"),
    Col("G", "binary", doc="pass on Gold (invalid run: 0)"),
    Col("Q", "binary", doc="Base-to-Gold success Q = B*G"),
    Col("base_valid", "bool", nullable=True, doc="r(b, R_B); null when there was no bundle to run"),
    Col("gold_valid", "bool", nullable=True, doc="r(b, R_G); null when there was no bundle to run"),
    Col("base_failure_kind", "str", nullable=True, doc="Execution.failure_kind on Base (docs/failure_kinds.md)"),
    Col("gold_failure_kind", "str", nullable=True, doc="Execution.failure_kind on Gold"),
    Col("miss", "str", choices=MISS_KINDS, doc="why Q=0 ('' when Q=1), as in pipeline.audit"),
    Col("attempts_used", "int", required=False, nullable=True),
    Col("exit_status", "str", required=False, nullable=True),
    Col("bundle_digest", "str", required=False, nullable=True),
) + _USAGE

LOCAL_STATUS = ("pass", "hard_fail", "inconclusive", "none")

RESOLVE_COLUMNS = _ID + (
    Col("repair_model", "str", doc="the Repair model spec actually used"),
    Col("test_model", "str", required=False, nullable=True, doc="the model that generated the bundle, if any"),
    Col("resolved", "bool", doc="fresh official evaluation of the terminal patch (invalid/missing: False)"),
    Col("official_valid", "bool", doc="the official evaluation ran to a result for every F2P/P2P node"),
    Col("local_status", "str", choices=LOCAL_STATUS, doc="gate status of the final patch (local, not official)"),
    Col("final_reason", "str", doc="no_bundle | round0_pass | check_pass | final_submit | budget_exhausted | ..."),
    Col("qualified_bundle", "bool", doc="a qualified bundle existed (else Round 0 is scored)"),
    Col("round0_resolved", "bool", nullable=True, doc="official evaluation of the Round-0 patch, when scored"),
    Col("round0_official_valid", "bool", required=False, nullable=True),
    Col("entered_repair", "bool", required=False, nullable=True),
    Col("revision_rounds", "int", required=False, nullable=True),
    Col("revision_turns", "int", required=False, nullable=True, doc="model turns after Round 0"),
    Col("total_turns", "int", required=False, nullable=True),
    Col("official_error", "str", required=False, nullable=True),
    Col("final_patch_sha", "str", required=False, nullable=True),
) + _USAGE


def _q_is_b_times_g(r: dict[str, Any]) -> str | None:
    if r["Q"] != r["B"] * r["G"]:
        return "Q must equal B*G"
    if (r["miss"] == "") != (r["Q"] == 1):
        return "miss must be '' exactly when Q=1"
    if r["base_valid"] is False and r["B"]:
        return "an invalid Base run cannot count as B=1"
    if r["gold_valid"] is False and r["G"]:
        return "an invalid Gold run cannot count as G=1"
    return None


def _resolved_needs_valid(r: dict[str, Any]) -> str | None:
    if r["resolved"] and not r["official_valid"]:
        return "resolved=true needs official_valid=true (an invalid evaluation cannot be resolved)"
    if r.get("round0_resolved") and r.get("round0_official_valid") is False:
        return "round0_resolved=true needs round0_official_valid=true"
    return None


def _cols(base: tuple[Col, ...], *extra: Col) -> tuple[Col, ...]:
    """`base` with `extra` appended; an extra column with a base column's name replaces it (stricter)."""
    names = {c.name for c in extra}
    return tuple(c for c in base if c.name not in names) + extra


_ROUND0_REQUIRED = (Col("round0_resolved", "bool", doc="official evaluation of the Round-0 patch"),
                    Col("round0_official_valid", "bool"))

B2G = Metric("b2g_pct", "Base-to-Gold %", "Q", valid=("base_valid", "gold_valid"))
BASE_FAIL = Metric("base_fail_pct", "clean Base failure %", "B", valid=("base_valid",))
RESOLVED = Metric("resolved_pct", "resolved %", "resolved", valid=("official_valid",))
ROUND0 = Metric("round0_resolved_pct", "Round-0 resolved %", "round0_resolved", valid=("round0_official_valid",))
FINAL = Metric("resolved_pct", "final resolved %", "resolved", valid=("official_valid",))   # Tables 3, 6: "Final"

_TABLE1_SOURCES = ("Qwen3.5-35B-A3B", "Qwen3.5-35B-A3B + SFT", "Qwen3.5-35B-A3B + SFT + RL", "Codex-5.3",
                   "DeepSeek-V4-Flash-0731", "GPT-5.6-sol")
_TABLE2_SOURCES = ("None (Round 0)", "GPT-5.6-sol", "Oracle F2P", "Base-35B", "RL-35B")
_SOURCE_ALIASES = {"none": "None (Round 0)", "oracle": "Oracle F2P"}

SCHEMAS: dict[str, ArtifactSchema] = {s.artifact: s for s in (
    ArtifactSchema(
        "table1", "Table 1: Test-agent Base-to-Gold success (%), SWE-bench Verified", "instance",
        _cols(B2G_COLUMNS, Col("test_source", "str", doc="the Test source, paper label (Table 1 rows)")),
        condition=("test_source",), metrics=(B2G, BASE_FAIL),
        contrasts=(Contrast("test_source", "Qwen3.5-35B-A3B", ("Qwen3.5-35B-A3B + SFT",), ("b2g_pct",)),
                   Contrast("test_source", "Qwen3.5-35B-A3B + SFT", ("Qwen3.5-35B-A3B + SFT + RL",), ("b2g_pct",))),
        order={"test_source": _TABLE1_SOURCES}, checks=(_q_is_b_times_g,)),
    ArtifactSchema(
        "table2", "Table 2: Resolved rates (%) across Repair agents and Test sources, SWE-bench Verified",
        "instance",
        _cols(RESOLVE_COLUMNS, Col("repair_agent", "str", choices=("base", "trained")),
              Col("test_source", "str", doc="feedback source, paper label (Table 2 columns)")),
        condition=("repair_agent", "test_source"), metrics=(RESOLVED,),
        contrasts=(Contrast("test_source", "None (Round 0)"), Contrast("repair_agent", "base")),
        order={"repair_agent": ("base", "trained"), "test_source": _TABLE2_SOURCES},
        aliases={"test_source": _SOURCE_ALIASES}, checks=(_resolved_needs_valid,)),
    ArtifactSchema(
        "table3", "Table 3: Repair-objective ablation, Round-0 and final resolved (%), SWE-bench Verified",
        "instance",
        _cols(RESOLVE_COLUMNS, Col("objective", "str"), Col("test_source", "str", doc="paper: RL-35B"),
              *_ROUND0_REQUIRED),
        condition=("objective", "test_source"), metrics=(ROUND0, FINAL),
        # the paper's text: full vs no-bonus (+1.9 Round 0, +1.2 final), full vs standard (+2.3 final)
        contrasts=(Contrast("objective", "Standard (no T2I)"),
                   Contrast("objective", "T2I, no direct bonus", ("Full T2I",)),
                   Contrast("metric", "round0_resolved_pct", ("resolved_pct",))),
        order={"objective": ("Standard (no T2I)", "T2I, no direct bonus", "Full T2I"), "test_source": ("RL-35B",)},
        aliases={"test_source": _SOURCE_ALIASES}, checks=(_resolved_needs_valid,)),
    ArtifactSchema(
        "table4", "Table 4: Test-agent SFT teacher comparison, Base-to-Gold (%)", "instance",
        _cols(B2G_COLUMNS, Col("teacher", "str"), Col("cot", "bool", doc="teacher reasoning kept in SFT data"),
              Col("stage", "str", choices=("sft", "sft_rl"))),
        condition=("teacher", "stage"), metrics=(B2G,),
        # the paper's text: the teachers differ by 4.2 points after SFT and by 26.0 after RL
        contrasts=(Contrast("stage", "sft", ("sft_rl",)),
                   Contrast("teacher", "GPT-5.6-sol (no CoT)", ("DeepSeek-V4-Flash (CoT)",))),
        order={"teacher": ("GPT-5.6-sol (no CoT)", "DeepSeek-V4-Flash (CoT)"), "stage": ("sft", "sft_rl")},
        checks=(_q_is_b_times_g,)),
    ArtifactSchema(
        "table5", "Table 5: Cross-language Base-to-Gold success (%)", "instance",
        _cols(B2G_COLUMNS, Col("language", "str"), Col("dataset", "str", doc="Verified (Python) or Multilingual")),
        condition=("language",), metrics=(B2G,),
        order={"language": ("Python", "Rust", "C++", "C", "Java")}, checks=(_q_is_b_times_g,)),
    ArtifactSchema(
        "table6", "Table 6: Repair training feedback ablation, Round-0 and final resolved (%)", "instance",
        _cols(RESOLVE_COLUMNS, Col("training_feedback", "str"), Col("test_source", "str", doc="paper: RL-35B"),
              *_ROUND0_REQUIRED),
        condition=("training_feedback", "test_source"), metrics=(ROUND0, FINAL),
        contrasts=(Contrast("training_feedback", "Generated tests"),
                   Contrast("metric", "round0_resolved_pct", ("resolved_pct",))),
        order={"training_feedback": ("Generated tests", "Oracle tests"), "test_source": ("RL-35B",)},
        aliases={"test_source": _SOURCE_ALIASES}, checks=(_resolved_needs_valid,)),
    ArtifactSchema(
        "figure5", "Figure 5: Resolved rate (%) by feedback source", "instance",
        _cols(RESOLVE_COLUMNS, Col("panel", "str", choices=("a", "b")), Col("benchmark", "str"),
              Col("repair_agent", "str"), Col("feedback_source", "str")),
        condition=("panel", "benchmark", "repair_agent", "feedback_source"), metrics=(RESOLVED,),
        contrasts=(Contrast("feedback_source", "Baseline"),),
        order={"panel": ("a", "b"), "benchmark": ("SWE-bench Verified", "SWE-bench Pro"),
               "repair_agent": ("GPT-5.6-sol", "Qwen3.5-35B-A3B"),
               "feedback_source": ("Baseline", "Qwen-35B generated", "GPT-5.6 generated", "Oracle")},
        checks=(_resolved_needs_valid,)),
    ArtifactSchema(
        "figure6", "Figure 6: Test-agent Base-to-Gold success vs SFT data size (6a); RL reward curves (6b, 6c)",
        "instance",
        _cols(B2G_COLUMNS, Col("checkpoint", "str", choices=("sft", "sft_rl", "teacher"),
                  doc="sft (0 trajectories = the base model), sft_rl (RL from that SFT), teacher"),
              Col("sft_trajectories", "int", doc="teacher trajectories in the SFT data (teacher: 0)")),
        condition=("checkpoint", "sft_trajectories"), metrics=(B2G,),
        order={"checkpoint": ("sft", "sft_rl", "teacher")}, checks=(_q_is_b_times_g,)),
    ArtifactSchema(
        "training", "GRPO training metrics (Figure 6b: Test agent, 6c: Repair agent)", "curve",
        (Col("step", "int", doc="optimizer step, 0-based"),
         Col("reward_mean", "float", doc="mean raw reward of the step's kept rollouts"),
         Col("reward_std", "float", doc="sd of those rewards across rollouts"),
         Col("masked_share", "float", doc="share of rollouts masked (operational error: zero advantage)"),
         Col("kept_groups", "int", doc="issue groups kept by dynamic sampling (non-zero reward variance)"),
         Col("dropped_groups", "int", doc="groups dropped (zero variance)"),
         Col("n_rollouts", "int", doc="rollouts that entered the update (paper: 16 x 8 = 128)"),
         Col("loss", "float", required=False, nullable=True),
         Col("kl", "float", required=False, nullable=True),
         Col("lr", "float", required=False, nullable=True),
         Col("entropy", "float", required=False, nullable=True),
         Col("clip_ratio", "float", required=False, nullable=True),
         Col("response_tokens_mean", "float", required=False, nullable=True),
         Col("wall_s", "float", required=False, nullable=True)),
        prefix_columns=(Col("level_", "int", doc="reward-level histogram: rollouts at that level, e.g. "
                            "Test: level_invalid (-0.2), level_zero (0), level_q (0.2), level_ba08 (0.5), "
                            "level_ba1 (1.0), level_*_halved; Repair: level_zero, level_local_fail (0.1), "
                            "level_local_pass (0.2), level_revision (1.0), level_round0 (1.5)"),),
        manifest_keys=("role", "init"), records_file="metrics.jsonl"),
    ArtifactSchema(
        "sft", "SFT metrics, one row per optimizer step (Test agent: Table 7a; Repair: a CPU demonstration)",
        "curve",
        (Col("step", "int", doc="optimizer step, 1-based (TRL's global step)"),
         Col("loss", "float", doc="mean cross-entropy over the step's supervised (assistant) tokens"),
         Col("mean_token_accuracy", "float", nullable=True, doc="share of supervised tokens predicted exactly"),
         Col("lr", "float", required=False, nullable=True),
         Col("grad_norm", "float", required=False, nullable=True),
         Col("entropy", "float", required=False, nullable=True),
         Col("epoch", "float", required=False, nullable=True),
         Col("num_tokens", "float", required=False, nullable=True, doc="tokens seen so far"),
         Col("step_s", "float", required=False, nullable=True),
         Col("optimizer_step_s", "float", required=False, nullable=True)),
        manifest_keys=("role", "init"), records_file="metrics.jsonl"),
)}

PAPER_ARTIFACTS = ("table1", "table2", "table3", "table4", "table5", "table6", "figure5", "figure6")

#: keys every run manifest carries (on top of execcritic.results.manifest.build_manifest's own)
MANIFEST_KEYS = ("artifact", "run_id", "preset", "created_at", "command", "git", "config", "models",
                 "instances", "runs", "status", "started_at", "ended_at", "wall_s", "usage")

#: columns of summary.csv (plus the artifact's condition columns first)
SUMMARY_COLUMNS = ("metric", "value", "ci_low", "ci_high", "ci_method", "n_instances", "n_runs", "n_invalid",
                   "n_missing", "n_boot", "seed")
#: columns of deltas.csv
DELTA_COLUMNS = ("metric", "vary", "baseline", "treatment", "within", "delta", "ci_low", "ci_high", "ci_method",
                 "p_value", "test", "n_instances", "n_better", "n_worse", "n_boot", "seed")
#: columns of a curve artifact's summary.csv
CURVE_SUMMARY_COLUMNS = ("metric", "value")


def schema(artifact: str) -> ArtifactSchema:
    try:
        return SCHEMAS[artifact]
    except KeyError:

        raise InputError(f"unknown artifact {artifact!r}; known: {', '.join(SCHEMAS)}", field="artifact") from None


def describe() -> dict[str, Any]:
    """Every schema as plain data (for docs and `--json`)."""
    return {a: {"title": s.title, "kind": s.kind, "records_file": s.records_file, "condition": list(s.condition),
                "metrics": [m.name for m in s.metrics],
                "columns": [{"name": c.name, "dtype": c.dtype, "required": c.required, "nullable": c.nullable,
                             "choices": list(c.choices) if c.choices else None, "doc": c.doc}
                            for c in s.columns + s.prefix_columns]}
            for a, s in SCHEMAS.items()}


__all__ = [
    "B2G_COLUMNS",
    "CURVE_SUMMARY_COLUMNS",
    "DELTA_COLUMNS",
    "LOCAL_STATUS",
    "MANIFEST_KEYS",
    "MISS_KINDS",
    "PAPER_ARTIFACTS",
    "RESOLVE_COLUMNS",
    "SCHEMAS",
    "STAND_IN",
    "SUMMARY_COLUMNS",
    "ArtifactSchema",
    "Col",
    "Contrast",
    "Metric",
    "describe",
    "order_key",
    "paper_part",
    "schema",
    "stand_in",
    "stand_in_name",
]
