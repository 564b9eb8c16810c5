"""What a paper artifact measures, as data: its conditions, the role that plays each part of a
condition, and the benchmark it runs on. `plan` turns them into what this preset can run and, for the
rest, why not - so a notebook never shows an invented number and never silently drops a condition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from execcritic.experiments.presets import TRAINED_ROLES
from execcritic.experiments.resolved import Params
from execcritic.results.reasons import REASONS
from execcritic.results.schemas import schema, stand_in
from execcritic.tasks.mlgit import qualified_languages

BUILTIN_SOURCES = ("oracle", "none")


@dataclass(frozen=True)
class Condition:
    """One row (or bar, or point) of a paper artifact.

    fields:    the condition columns with the paper's labels
    test:      the Test source: "oracle" (official F2P bundle), "none" (no test, Round 0 only) or a role
    repair:    the role of the Repair agent (resolution artifacts; None for Base-to-Gold)
    benchmark: verified | multilingual | pro (the preset maps each to a task set, or cannot run it)
    language:  the Multilingual subset (Table 5)
    labels:    condition column -> role whose stand-in name is appended to that column's label
    record:    fixed record fields (Table 4: cot; Table 5: dataset)
    """

    fields: Mapping[str, Any]
    test: str | None = None
    repair: str | None = None
    benchmark: str = "verified"
    language: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    record: Mapping[str, Any] = field(default_factory=dict)

    def roles(self) -> list[str]:
        return [r for r in (self.test, self.repair) if r and r not in BUILTIN_SOURCES]


@dataclass(frozen=True)
class ArtifactSpec:
    """A paper artifact: `kind` b2g (Base-to-Gold of Test bundles) or resolve (official resolution of
    Repair runs); `round0` records the Round-0 official outcome too; `test_column`/`repair_column` name
    the condition columns the notebook's test_sources/repair_agent parameters select on."""

    artifact: str
    kind: str
    conditions: tuple[Condition, ...]
    round0: bool = False
    test_column: str | None = None
    repair_column: str | None = None
    curves: tuple[tuple[str, str], ...] = ()      # training curves shown with it: (role, init)

    def values(self, which: str) -> list[str]:
        col = self.test_column if which == "test" else self.repair_column
        if col is None:
            return []
        return list(dict.fromkeys(str(c.fields[col]) for c in self.conditions))

    def label(self, cond: Condition) -> str:
        return schema(self.artifact).condition_label(dict(cond.fields))


@dataclass
class Planned:
    """A condition as this run will treat it: the fields it is recorded under (stand-in labels applied),
    the specs that play its roles, its task set - or the reason it is not run here."""

    cond: Condition
    paper_label: str
    fields: dict[str, Any]
    reason: str = ""
    test_spec: str | None = None          # "oracle" | "none" | model spec
    repair_spec: str | None = None
    dataset: str | None = None
    bindings: dict[str, Any] = field(default_factory=dict)

    @property
    def runnable(self) -> bool:
        return not self.reason


def merge_reasons(reasons: Sequence[str]) -> str:
    """One reason from several roles': the same words with different "(preset X binds no model to role
    R)" tails are said once, naming every role."""
    unbound: dict[tuple[str, str], list[str]] = {}
    needs: dict[str, list[str]] = {}
    order: list[tuple[str, Any]] = []
    for r in reasons:
        if m := re.match(r"^(.*) \(preset (\S+) binds no model to role (\S+)\)$", r):
            key = (m.group(1), m.group(2))
            if key not in unbound:
                order.append(("unbound", key))
            unbound.setdefault(key, []).append(m.group(3))
        elif m := re.match(r"^(.*) \(needs (`[^`]*`)\)$", r):
            if m.group(1) not in needs:
                order.append(("needs", m.group(1)))
            needs.setdefault(m.group(1), []).append(m.group(2))
        else:
            order.append(("plain", r))
    out = []
    for kind, key in order:
        if kind == "unbound":
            roles = list(dict.fromkeys(unbound[key]))
            out.append(f"{key[0]} (preset {key[1]} binds no model to role{'s' if len(roles) > 1 else ''} "
                       f"{', '.join(roles)})")
        elif kind == "needs":
            out.append(f"{key} (needs {' and '.join(dict.fromkeys(needs[key]))})")
        else:
            out.append(key)
    return "; ".join(dict.fromkeys(out))


def plan(spec: ArtifactSpec, params: Params, checkpoint=None) -> list[Planned]:
    """Every condition of `spec` under `params`: runnable (with specs and labels) or with its reason.
    `checkpoint(role)` -> (spec or None, reason) asks the training adapter for a trained role's model."""
    out = []
    for cond in spec.conditions:
        p = Planned(cond, spec.label(cond), dict(cond.fields))
        out.append(p)
        if spec.test_column and params.test_sources and str(cond.fields[spec.test_column]) not in params.test_sources:
            p.reason = f"not selected by this run's parameters (test_sources={list(params.test_sources)})"
            continue
        if spec.repair_column and params.repair_agents and \
                str(cond.fields[spec.repair_column]) not in params.repair_agents:
            p.reason = f"not selected by this run's parameters (repair_agent={list(params.repair_agents)})"
            continue
        if cond.benchmark == "verified":
            p.dataset = params.dataset
        else:
            p.dataset = params.preset.benchmarks.get(cond.benchmark)
            if not p.dataset:
                p.reason = REASONS["data:pro" if cond.benchmark == "pro" else "images:multilingual"] + \
                    f" (preset {params.preset.name} has no {cond.benchmark} task set)"
                continue
            if p.dataset == "multilingual-git" and cond.language not in qualified_languages():
                p.reason = REASONS["images:multilingual"] + f" ({cond.language}: no row of it is qualified in the " \
                    "multilingual-git recipe)"
                continue
        reasons = []
        for role in cond.roles():
            b = params.binding(role)
            if not b.bound and checkpoint is not None and role in TRAINED_ROLES and params.preset.training != "none":
                got, why = checkpoint(role)
                if got is not None:
                    b = got
                else:
                    reasons.append(why)
                    continue
            if not b.bound:
                reasons.append(b.reason)
                continue
            p.bindings[role] = b
        if reasons:
            p.reason = merge_reasons(reasons)
            continue
        for col, role in cond.labels.items():
            b = p.bindings.get(role)
            if b is not None and b.stand_in:
                p.fields[col] = stand_in(str(p.fields[col]), b.name)
        p.test_spec = cond.test if cond.test in BUILTIN_SOURCES else \
            (p.bindings[cond.test].spec if cond.test else None)
        p.repair_spec = p.bindings[cond.repair].spec if cond.repair else None
    return out


__all__ = ["BUILTIN_SOURCES", "ArtifactSpec", "Condition", "Planned", "plan"]
