"""Versioned results: `results/<artifact>/<run_id>/`, an index of every run, and a schema check on load.

A run directory holds
  manifest.json    build_manifest() (git, command, config + deviations, digests, host) plus artifact,
                   run_id, preset, models/endpoints per role, instances (the denominator), runs,
                   sessions with start/end, wall seconds, token counts and cost when known, status
  records.jsonl    one JSON object per instance x condition x run (training: metrics.jsonl, one per step),
                   append-only and fsynced (results.records.RecordStore): a killed run resumes where it stopped
  summary.csv      per condition x metric: value (%), bootstrap CI, n, invalid/missing counts (stats.summarize)
  deltas.csv       the artifact's paired contrasts (stats.contrasts)
  *.csv            any further per-artifact tables (RunWriter.write_table)
  notebook.ipynb   optionally, the executed notebook
`results/index.csv` lists every run. `load_run` rejects a malformed run with an InputError that names the
file and the field: a missing manifest key, a record missing a required column or of the wrong type, a
duplicate record, or a summary that does not match what its records recompute to.
"""

from __future__ import annotations

import csv
import dataclasses
import fcntl
import io
import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from execcritic.config import PAPER
from execcritic.errors import InputError
from execcritic.files import atomic_write
from execcritic.results import stats
from execcritic.results.manifest import build_manifest
from execcritic.results.records import RecordStore, unit_key
from execcritic.results.schemas import (
    CURVE_SUMMARY_COLUMNS,
    DELTA_COLUMNS,
    MANIFEST_KEYS,
    SUMMARY_COLUMNS,
    ArtifactSchema,
    Col,
    paper_part,
    schema,
)

#: the committed store (what paper_figures/ is built from) and where runs go by default: `runs/results`, outside
#: it, so an exploratory notebook or training run never lands among the runs a reviewer cites
COMMITTED_ROOT = Path(__file__).resolve().parents[2] / "results"
DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "runs" / "results"
INDEX_COLUMNS = ("artifact", "run_id", "preset", "created_at", "git_sha", "n_instances", "status", "path", "command")
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")
RESERVED_FILES = ("manifest.json", "summary.csv", "deltas.csv", "notebook.ipynb")


# ---- small helpers -------------------------------------------------------------------------------------

#: statuses of a finalized run: "complete" (records measured), "empty" (finalized with no record: its manifest
#: still says why each condition was not run, but it is never taken for a measured run)
FINISHED = ("complete", "empty")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _csv_text(df: pd.DataFrame) -> str:
    return df.to_csv(index=False, lineterminator="\n")


def _plain(v: Any) -> Any:
    """numpy scalars (from a DataFrame row) as plain Python values."""
    return v.item() if isinstance(v, np.generic) else v


def _root(root: str | Path | None) -> Path:
    return Path(root) if root is not None else Path(os.environ.get("EXECCRITIC_RESULTS", DEFAULT_ROOT))


# ---- record validation ---------------------------------------------------------------------------------

def _type_ok(col: Col, v: Any) -> bool:
    if col.dtype == "str":
        return isinstance(v, str)
    if col.dtype == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if col.dtype == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if col.dtype == "bool":
        return isinstance(v, bool)
    if col.dtype == "binary":
        return isinstance(v, (bool, int)) and v in (0, 1)
    raise ValueError(f"unknown dtype {col.dtype}")


def validate_record(sch: ArtifactSchema, rec: Mapping[str, Any], *, file: str, where: str = "") -> dict[str, Any]:
    """Check one record against the artifact's schema; return it normalized (aliases resolved, numpy
    scalars unwrapped, binary columns as 0/1). Raises InputError naming the file and the field."""
    if not isinstance(rec, Mapping):
        raise InputError(f"{where}a record must be a JSON object, got {type(rec).__name__}", file=file)
    out = {k: _plain(v) for k, v in rec.items() if k != "key"}
    inst = out.get("instance_id") if isinstance(out.get("instance_id"), str) else None
    for col in sch.columns:
        if col.name not in out:
            if col.required:
                raise InputError(f"{where}record lacks required column {col.name!r} ({sch.artifact})",
                                 file=file, field=col.name, instance=inst)
            continue
    for name, v in list(out.items()):
        col = sch.column(name)
        if col is None:
            continue                      # extra columns are kept as they are
        if stats.is_null(v):
            if not col.nullable:
                raise InputError(f"{where}{name} must not be null ({sch.artifact})", file=file, field=name,
                                 instance=inst)
            out[name] = None
            continue
        if not _type_ok(col, v):
            raise InputError(f"{where}{name}={v!r} is not of type {col.dtype} ({sch.artifact})", file=file,
                             field=name, instance=inst)
        if col.dtype == "binary":
            v = out[name] = int(v)
        if col.dtype == "str":
            v = out[name] = sch.canonical(name, v)
        if col.choices is not None and paper_part(v) not in col.choices:
            raise InputError(f"{where}{name}={v!r} is not one of {list(col.choices)} ({sch.artifact})", file=file,
                             field=name, instance=inst)
    for check in sch.checks:
        msg = check(out)
        if msg:
            raise InputError(f"{where}{msg} ({sch.artifact})", file=file, instance=inst,
                             field=check.__name__.lstrip("_"))
    return out


def record_key(sch: ArtifactSchema, rec: Mapping[str, Any]) -> str:
    return unit_key(*(rec[c] for c in sch.key_columns))


def _frame(sch: ArtifactSchema, records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records as a DataFrame with every schema column present and typed (nullable columns use pandas'
    nullable dtypes), extra columns after them."""
    names = [c.name for c in sch.columns]
    extra = sorted({k for r in records for k in r} - set(names))
    df = pd.DataFrame(records, columns=names + extra)
    for col in sch.columns:
        s = df[col.name]
        if col.dtype == "str":
            df[col.name] = s.astype(object).where(s.notna(), None)
        elif col.dtype in ("int", "binary"):
            df[col.name] = s.astype("Int64" if col.nullable or not col.required else "int64")
        elif col.dtype == "float":
            df[col.name] = s.astype("float64")
        elif col.dtype == "bool":
            df[col.name] = s.astype("boolean" if col.nullable or not col.required else "bool")
    for name in extra:
        c = sch.column(name)
        if c is not None and c.dtype in ("int", "binary"):
            df[name] = df[name].astype("Int64")
    return df


# ---- the run --------------------------------------------------------------------------------------------

@dataclass
class Run:
    """A loaded, schema-checked run. `records` is one row per record; `summary`/`deltas` as written."""

    artifact: str
    run_id: str
    path: Path
    manifest: dict[str, Any]
    records: pd.DataFrame
    summary: pd.DataFrame | None
    deltas: pd.DataFrame | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def schema(self) -> ArtifactSchema:
        return schema(self.artifact)

    @property
    def made_at(self) -> str:
        """The commit that made the run (8 hex digits), as its manifest records it: what a figure names."""
        return str((self.manifest.get("git") or {}).get("sha") or "unknown")[:8]

    @property
    def instances(self) -> list[str]:
        return list(self.manifest.get("instances") or [])

    @property
    def runs(self) -> int:
        return int(self.manifest.get("runs") or 1)

    @property
    def preset(self) -> str:
        return str(self.manifest.get("preset"))

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"

    @property
    def notebook(self) -> Path | None:
        p = self.path / "notebook.ipynb"
        return p if p.is_file() else None

    def recompute(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """summary and deltas as the records give them (with the manifest's bootstrap settings)."""
        st = self.manifest.get("stats") or {}
        kw = {"n_boot": int(st.get("n_boot", stats.N_BOOT)), "seed": int(st.get("seed", stats.SEED)),
              "level": float(st.get("level", stats.LEVEL))}
        kw["denominators"] = self.manifest.get("denominators") or None
        return (stats.summarize(self.schema, self.records, self.instances, self.runs, **kw),
                stats.contrasts(self.schema, self.records, self.instances, self.runs, **kw))


class RunWriter:
    """Writes one run. Reopening an existing run_id continues it: records already present are kept and
    a record with the same key is not written twice (append returns False)."""

    def __init__(self, root: Path, artifact: str, run_id: str, manifest: dict[str, Any]):
        self.root, self.artifact, self.run_id = root, artifact, run_id
        self.schema = schema(artifact)
        self.path = root / artifact / run_id
        self.manifest = manifest
        self.records_path = self.path / self.schema.records_file
        self._store = RecordStore(self.records_path)
        self.records_path.touch()             # a run with no records yet still has its (empty) records file
        self._t0 = time.time()
        self._usage_added = False
        self._instances = set(manifest.get("instances") or [])
        self._write_manifest()

    # records
    def append(self, record: Mapping[str, Any]) -> bool:
        """Validate and append one record; False when a record with its key is already there (resume)."""
        rec = validate_record(self.schema, record, file=str(self.records_path))
        self._check_denominator(rec, str(self.records_path))
        return self._store.append({"key": record_key(self.schema, rec), **rec})

    def extend(self, records: Iterable[Mapping[str, Any]]) -> int:
        return sum(self.append(r) for r in records)

    def __contains__(self, key: str) -> bool:
        return key in self._store

    def key(self, **fields: Any) -> str:
        """The key a record with these fields gets (to skip finished units when resuming)."""
        return record_key(self.schema, {k: self.schema.canonical(k, v) for k, v in fields.items()})

    def _check_denominator(self, rec: dict[str, Any], file: str) -> None:
        if self.schema.kind != "instance":
            return
        if rec["instance_id"] not in self._instances:
            raise InputError("record for an instance outside the run's instances (manifest.instances)",
                             file=file, field="instance_id", instance=rec["instance_id"])
        if not 0 <= rec["run"] < int(self.manifest["runs"]):
            raise InputError(f"run={rec['run']} outside 0..{int(self.manifest['runs']) - 1} (manifest.runs)",
                             file=file, field="run", instance=rec["instance_id"])

    # extras
    def add_usage(self, *, tokens_prompt: int | None = None, tokens_completion: int | None = None,
                  cost_usd: float | None = None) -> None:
        """Accumulate token counts / cost reported by the model endpoints (None: unknown, left as is)."""
        u = self.manifest["usage"]
        for k, v in (("tokens_prompt", tokens_prompt), ("tokens_completion", tokens_completion), ("cost_usd", cost_usd)):
            if v is not None:
                u[k] = (u.get(k) or 0) + v
        u["source"] = "add_usage"
        self._usage_added = True
        self._write_manifest()

    def write_table(self, name: str, df: pd.DataFrame) -> Path:
        """A further per-artifact CSV next to summary.csv (atomic)."""
        if not name.endswith(".csv") or "/" in name or name in RESERVED_FILES:
            raise InputError(f"table name {name!r} must be a plain *.csv name other than {RESERVED_FILES}",
                             field="name")
        p = self.path / name
        atomic_write(p, _csv_text(df))
        return p

    def update_manifest(self, **fields: Any) -> None:
        """Add or replace descriptive manifest fields (timings, notes); the keys the store maintains
        (artifact, run_id, preset, instances, runs, status, sessions) cannot be changed this way."""
        fixed = {"artifact", "run_id", "preset", "instances", "n_instances", "runs", "status", "sessions",
                 "records_file", "started_at", "ended_at", "wall_s"}
        bad = sorted(set(fields) & fixed)
        if bad:
            raise InputError(f"update_manifest cannot change {bad}", file=str(self.path / "manifest.json"),
                             field=bad[0])
        self.manifest.update(fields)
        self._write_manifest()

    def set_denominators(self, denominators: Mapping[str, Sequence[str]]) -> None:
        """Per-condition denominators (condition label -> instance ids), for artifacts whose conditions run
        on different task sets (Table 5: one language subset each; Figure 5a: Verified and Pro). Every id
        must be in manifest.instances; a condition not listed uses all of them."""
        out = {}
        for label, ids in denominators.items():
            ids = list(dict.fromkeys(ids))
            stray = [i for i in ids if i not in self._instances]
            if stray:
                raise InputError(f"denominator of {label!r} names instances outside manifest.instances: "
                                 f"{stray[:3]}", file=str(self.path / "manifest.json"), field="denominators")
            out[str(label)] = ids
        self.manifest["denominators"] = out
        self._write_manifest()

    def attach_notebook(self, notebook: str | Path) -> Path:
        p = self.path / "notebook.ipynb"
        atomic_write(p, Path(notebook).read_bytes())
        self.manifest["notebook"] = "notebook.ipynb"
        self._write_manifest()
        return p

    # lifecycle
    def _session_close(self, status: str) -> None:
        end = time.time()
        s = self.manifest["sessions"][-1]
        s["ended_at"] = _now()
        s["wall_s"] = round(end - self._t0, 3)
        self.manifest["wall_s"] = round(sum(x.get("wall_s") or 0.0 for x in self.manifest["sessions"]), 3)
        self.manifest["ended_at"] = s["ended_at"]
        self.manifest["status"] = status

    def _write_manifest(self) -> None:
        atomic_write(self.path / "manifest.json", json.dumps(self.manifest, indent=2, default=str) + "\n")
        _upsert_index(self.root, self.manifest)

    def finalize(self, *, n_boot: int = stats.N_BOOT, seed: int = stats.SEED, level: float = stats.LEVEL) -> Run:
        """Compute summary.csv and deltas.csv from the records, close the session, mark the run complete."""
        recs = [validate_record(self.schema, r, file=str(self.records_path)) for r in self._store.iter()]
        df = _frame(self.schema, recs)
        instances = list(self.manifest.get("instances") or [])
        runs = int(self.manifest.get("runs") or 1)
        dens = self.manifest.get("denominators") or None
        summary = stats.summarize(self.schema, df, instances, runs, n_boot=n_boot, seed=seed, level=level,
                                  denominators=dens)
        deltas = stats.contrasts(self.schema, df, instances, runs, n_boot=n_boot, seed=seed, level=level,
                                 denominators=dens)
        atomic_write(self.path / "summary.csv", _csv_text(summary))
        if self.schema.kind == "instance":
            atomic_write(self.path / "deltas.csv", _csv_text(deltas))
        self.manifest["stats"] = {"n_boot": n_boot, "seed": seed, "level": level}
        self.manifest["n_records"] = len(recs)
        if not self._usage_added and self.manifest["usage"].get("source") != "add_usage":
            self.manifest["usage"] = _usage_from_records(recs)
        # a run that measured nothing (every condition not run here) is finished, but never "complete": it
        # must not stand in for a measured run anywhere a complete one is looked for
        self._session_close("complete" if recs else "empty")
        self._write_manifest()
        return load_run(self.artifact, self.run_id, root=self.root)

    def close(self, status: str = "incomplete") -> None:
        """End this session without finalizing (the run can be reopened and continued)."""
        self._session_close(status)
        self._write_manifest()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.manifest.get("status") == "running":
            self.close("incomplete")


def attach_notebook(artifact: str, run_id: str, notebook: str | Path, *, root: str | Path | None = None) -> Path:
    """Store the executed notebook of a finished run as its `notebook.ipynb` (the run's records, summary
    and status are left as they are; the manifest names the notebook)."""
    base = _root(root)
    mpath = base / artifact / run_id / "manifest.json"
    m = _read_manifest(mpath, artifact, run_id)
    p = mpath.parent / "notebook.ipynb"
    atomic_write(p, Path(notebook).read_bytes())
    m["notebook"] = "notebook.ipynb"
    atomic_write(mpath, json.dumps(m, indent=2, default=str) + "\n")
    _upsert_index(base, m)
    return p


def _usage_from_records(recs: list[dict[str, Any]]) -> dict[str, Any]:
    u: dict[str, Any] = {"tokens_prompt": None, "tokens_completion": None, "cost_usd": None, "source": "unknown"}
    for k in ("tokens_prompt", "tokens_completion", "cost_usd"):
        vals = [r[k] for r in recs if r.get(k) is not None]
        if vals:
            u[k] = sum(vals)
            u["source"] = "records"
    return u


def new_run(artifact: str, preset: str, *, run_id: str | None = None, root: str | Path | None = None,
            instances: Sequence[str] | None = None, runs: int = 1, models: Mapping[str, Any] | None = None,
            command: list[str] | str | None = None, config: Any = None, datasets: list[dict[str, Any]] | None = None,
            seeds: list[int] | None = None, extra: Mapping[str, Any] | None = None) -> RunWriter:
    """Open a run for writing. A new run needs its instance list (the denominator: every instance counts)
    and the number of Repair/generation runs; `models` maps a role (test, repair, teacher...) to its
    spec and endpoint. Passing the run_id of an existing run reopens it to continue (same preset and
    instances required)."""
    sch = schema(artifact)
    base = _root(root)
    if run_id is not None and not _RUN_ID.match(run_id):
        raise InputError(f"run_id {run_id!r} must match {_RUN_ID.pattern}", field="run_id")
    if run_id is not None and (base / artifact / run_id / "manifest.json").is_file():
        return _reopen(base, sch, run_id, preset, instances, runs)
    if sch.kind == "instance" and not instances:
        raise InputError(f"{artifact}: a new run needs its instance ids (every instance is in the denominator)",
                         field="instances")
    if runs < 1:
        raise InputError("runs must be >= 1", field="runs")
    missing = [k for k in sch.manifest_keys if k not in (extra or {})]
    if missing:
        raise InputError(f"{artifact} runs need {missing} in extra", field=missing[0])
    if run_id is None:
        stem = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{re.sub(r'[^A-Za-z0-9._-]', '_', preset)}"
        run_id, n = stem, 1
        while (base / artifact / run_id).exists():
            n += 1
            run_id = f"{stem}-{n}"

    m = build_manifest(command=command, config=config or PAPER, datasets=datasets, model=dict(models or {}),
                       seeds=seeds, extra=dict(extra or {}))
    ids = list(dict.fromkeys(instances or []))
    m.update({"artifact": artifact, "run_id": run_id, "preset": preset, "models": dict(models or {}),
              "instances": ids, "n_instances": len(ids), "runs": runs, "records_file": sch.records_file,
              "status": "running", "started_at": m["created_at"], "ended_at": None, "wall_s": 0.0,
              "sessions": [{"started_at": m["created_at"], "ended_at": None, "wall_s": None}],
              "usage": {"tokens_prompt": None, "tokens_completion": None, "cost_usd": None, "source": "unknown"}})
    return RunWriter(base, artifact, run_id, m)


def _reopen(base: Path, sch: ArtifactSchema, run_id: str, preset: str, instances: Sequence[str] | None,
            runs: int) -> RunWriter:
    mpath = base / sch.artifact / run_id / "manifest.json"
    m = _read_manifest(mpath, sch.artifact, run_id)
    if m["preset"] != preset:
        raise InputError(f"run {run_id} was started with preset {m['preset']!r}, not {preset!r}",
                         file=str(mpath), field="preset")
    if instances is not None and list(dict.fromkeys(instances)) != list(m["instances"]):
        raise InputError("reopening a run with other instances would change its denominator", file=str(mpath),
                         field="instances")
    if runs != int(m["runs"]):
        raise InputError(f"run {run_id} has runs={m['runs']}, not {runs}", file=str(mpath), field="runs")
    m["status"] = "running"
    m["sessions"].append({"started_at": _now(), "ended_at": None, "wall_s": None})
    return RunWriter(base, sch.artifact, run_id, m)


# ---- loading and the schema check -----------------------------------------------------------------------

def _read_manifest(path: Path, artifact: str, run_id: str) -> dict[str, Any]:
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("run has no manifest", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"manifest is not valid JSON ({exc.msg}, line {exc.lineno})", file=str(path)) from None
    if not isinstance(m, dict):
        raise InputError("manifest must be a JSON object", file=str(path))
    sch = schema(artifact)
    for k in (*MANIFEST_KEYS, *sch.manifest_keys):
        if k not in m:
            raise InputError(f"manifest lacks {k!r}", file=str(path), field=k)
    if m["artifact"] != artifact:
        raise InputError(f"manifest says artifact {m['artifact']!r} but the run lives under {artifact}/",
                         file=str(path), field="artifact")
    if m["run_id"] != run_id:
        raise InputError(f"manifest says run_id {m['run_id']!r} but the directory is {run_id}", file=str(path),
                         field="run_id")
    if not isinstance(m["instances"], list) or (sch.kind == "instance" and not m["instances"]):
        raise InputError("manifest.instances must list the run's instance ids", file=str(path), field="instances")
    if not isinstance(m["runs"], int) or m["runs"] < 1:
        raise InputError("manifest.runs must be an integer >= 1", file=str(path), field="runs")
    if artifact == "training":
        if m["role"] not in TRAINING_ROLES:
            raise InputError(f"manifest.role must be one of {list(TRAINING_ROLES)}, got {m['role']!r}",
                             file=str(path), field="role")
        if not (isinstance(m["init"], str) and m["init"]) and not (isinstance(m["init"], dict)
                                                                  and isinstance(m["init"].get("spec"), str)):
            raise InputError("manifest.init must be the initialization's label (base, sft, ...) or, in runs written "
                             f"before labels, the model facts with a 'spec'; got {m['init']!r}", file=str(path),
                             field="init")
    return m


# ---- training runs (Figure 6b, 6c) -----------------------------------------------------------------------

TRAINING_ROLES = ("test", "repair")
#: model aliases that are the base (untrained) policy: training from them is "RL from Base"
BASE_MODEL_ALIASES = ("tiny", "smollm2")


def training_init(manifest: Mapping[str, Any]) -> str:
    """The initialization label of a training run (`base`, `sft`, ...), as Figure 6b groups curves by it.

    The manifest's `init` is that label. Runs written before the label existed (e.g. the committed CPU smoke
    runs) carry the model facts there instead (`{"spec": ..., "path": ...}`); their label is `base` for an
    embedded base alias (tiny, smollm2) and the spec itself otherwise - never a guess that it was SFT."""
    init = manifest.get("init")
    if isinstance(init, str):
        return init
    if isinstance(init, Mapping):
        spec = str(init.get("spec"))
        return "base" if spec in BASE_MODEL_ALIASES else spec
    return str(init)


def training_curve(run: Run) -> pd.DataFrame:
    """The points of a GRPO run's reward curve (`stats.curve_points`), their intervals within the reward range of
    the reward levels the run recorded in its manifest (the paper's where it recorded none)."""
    return stats.curve_points(run.records, reward_bounds(run.manifest))


def reward_bounds(manifest: Mapping[str, Any]) -> tuple[float, float]:
    key = "test_reward" if manifest.get("role") == "test" else "repair_reward"
    default = getattr(PAPER, key)
    recorded = ((manifest.get("config") or {}).get(key) or {})
    known = {f.name for f in dataclasses.fields(default)}
    return dataclasses.replace(default, **{k: v for k, v in recorded.items() if k in known}).bounds()


def _read_records(path: Path, sch: ArtifactSchema, m: dict[str, Any]) -> list[dict[str, Any]]:
    if not path.is_file():
        raise InputError("run has no records file", file=str(path))
    out, seen = [], {}
    instances, runs = set(m["instances"]), int(m["runs"])
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                break                         # torn tail of a killed writer; RecordStore drops it on reopen
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"line {lineno}: not valid JSON ({exc.msg})", file=str(path)) from None
            rec = validate_record(sch, raw, file=str(path), where=f"line {lineno}: ")
            key = record_key(sch, rec)
            if key in seen:
                raise InputError(f"line {lineno}: duplicate record {key} (first at line {seen[key]})",
                                 file=str(path), field="/".join(sch.key_columns))
            seen[key] = lineno
            if sch.kind == "instance":
                if rec["instance_id"] not in instances:
                    raise InputError(f"line {lineno}: instance not in manifest.instances", file=str(path),
                                     field="instance_id", instance=rec["instance_id"])
                if not 0 <= rec["run"] < runs:
                    raise InputError(f"line {lineno}: run={rec['run']} outside 0..{runs - 1} (manifest.runs)",
                                     file=str(path), field="run", instance=rec["instance_id"])
            out.append(rec)
    return out


def _read_csv(path: Path, sch: ArtifactSchema, required: Sequence[str]) -> pd.DataFrame:
    dtypes = {c: str for c in sch.condition if (col := sch.column(c)) is not None and col.dtype == "str"}
    dtypes.update({c: str for c in ("metric", "vary", "baseline", "treatment", "within", "test")})
    try:
        df = pd.read_csv(path, dtype=dtypes, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        raise InputError("empty CSV (not even a header)", file=str(path)) from None
    for c in required:
        if c not in df.columns:
            raise InputError(f"{path.name} lacks column {c!r}", file=str(path), field=c)
    return df


def _same(a: Any, b: Any) -> bool:
    if stats.is_null(a) and stats.is_null(b):
        return True
    if stats.is_null(a) or stats.is_null(b):
        return False
    if isinstance(a, (int, float, np.number)) and isinstance(b, (int, float, np.number)):
        return abs(float(a) - float(b)) <= 0.6 * 10 ** -stats.DECIMALS
    return str(a) == str(b)


def _compare(written: pd.DataFrame, expected: pd.DataFrame, keys: Sequence[str], path: Path, what: str) -> None:
    """Every row of `expected` must be in `written` with equal values, and nothing else."""
    def index(df: pd.DataFrame) -> dict[tuple, dict[str, Any]]:
        return {tuple(str(r[k]) for k in keys): r for r in df.to_dict("records")}

    w, e = index(written), index(expected)
    for k in e:
        if k not in w:
            raise InputError(f"{what} has no row for {dict(zip(keys, k))}, which the records give",
                             file=str(path), field=keys[-1])
    for k in w:
        if k not in e:
            raise InputError(f"{what} row {dict(zip(keys, k))} is not what the records give (no such records)",
                             file=str(path), field=keys[-1])
    for k, row in e.items():
        for col, v in row.items():
            if col in keys:
                continue
            if not _same(w[k].get(col), v):
                raise InputError(f"{what} row {dict(zip(keys, k))}: {col}={w[k].get(col)!r} does not match "
                                 f"{v!r} recomputed from the records", file=str(path), field=col)


def load_run(artifact: str, run_id: str, *, root: str | Path | None = None, allow_incomplete: bool = False) -> Run:
    """Load and schema-check a run. A run that was not finalized needs allow_incomplete=True (its
    summary is then None)."""
    sch = schema(artifact)
    path = _root(root) / artifact / run_id
    m = _read_manifest(path / "manifest.json", artifact, run_id)
    recs = _read_records(path / sch.records_file, sch, m)
    run = Run(artifact, run_id, path, m, _frame(sch, recs), None)
    complete = m.get("status") in FINISHED
    if not complete and not allow_incomplete:
        raise InputError(f"run is not complete (status {m.get('status')!r}); finalize it or pass "
                         "allow_incomplete=True", file=str(path / "manifest.json"), field="status")
    spath, dpath = path / "summary.csv", path / "deltas.csv"
    if complete or spath.is_file():
        if not spath.is_file():
            raise InputError("complete run has no summary.csv", file=str(spath))
        cond = list(sch.condition)
        scols = CURVE_SUMMARY_COLUMNS if sch.kind == "curve" else SUMMARY_COLUMNS
        run.summary = _read_csv(spath, sch, [*cond, *scols])
        exp_summary, exp_deltas = run.recompute()
        _compare(run.summary, exp_summary, [*cond, "metric"], spath, "summary.csv")
        if sch.kind == "instance":
            if not dpath.is_file():
                raise InputError("complete run has no deltas.csv", file=str(dpath))
            run.deltas = _read_csv(dpath, sch, DELTA_COLUMNS)
            _compare(run.deltas, exp_deltas, ["metric", "vary", "baseline", "treatment", "within"], dpath,
                     "deltas.csv")
    for p in sorted(path.glob("*.csv")):
        if p.name not in RESERVED_FILES:
            run.tables[p.stem] = pd.read_csv(p)
    return run


# ---- the index ------------------------------------------------------------------------------------------

def _index_row(m: Mapping[str, Any]) -> dict[str, Any]:
    return {"artifact": m["artifact"], "run_id": m["run_id"], "preset": m["preset"], "created_at": m["created_at"],
            "git_sha": (m.get("git") or {}).get("sha") or "", "n_instances": len(m.get("instances") or []),
            "status": m.get("status", ""), "path": f"{m['artifact']}/{m['run_id']}", "command": m.get("command", "")}


def _write_index(root: Path, rows: list[dict[str, Any]]) -> None:
    rows = sorted(rows, key=lambda r: (r["artifact"], r["created_at"], r["run_id"]))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(INDEX_COLUMNS), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write(root / "index.csv", buf.getvalue())


def _read_index(root: Path) -> list[dict[str, Any]]:
    p = root / "index.csv"
    if not p.is_file():
        return []
    with p.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _upsert_index(root: Path, m: Mapping[str, Any]) -> None:
    """Insert or replace this run's row; serialized by an flock on the results directory."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        row = _index_row(m)
        rows = [r for r in _read_index(root) if (r["artifact"], r["run_id"]) != (row["artifact"], row["run_id"])]
        _write_index(root, rows + [row])
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def rebuild_index(root: str | Path | None = None) -> pd.DataFrame:
    """Rewrite results/index.csv from the run manifests on disk (when it was lost or hand-edited)."""
    base = _root(root)
    rows = []
    for mpath in sorted(base.glob("*/*/manifest.json")):
        artifact, run_id = mpath.parent.parent.name, mpath.parent.name
        try:
            schema(artifact)
        except InputError:
            continue                      # not an artifact run (e.g. results/audit/...)
        rows.append(_index_row(_read_manifest(mpath, artifact, run_id)))
    _write_index(base, rows)
    return list_runs(root=base)


def list_runs(artifact: str | None = None, *, root: str | Path | None = None) -> pd.DataFrame:
    """Every run in results/index.csv (optionally of one artifact), oldest first."""
    rows = _read_index(_root(root))
    df = pd.DataFrame(rows, columns=list(INDEX_COLUMNS))
    if artifact is not None:
        df = df[df["artifact"] == artifact]
    df["n_instances"] = pd.to_numeric(df["n_instances"]).astype("int64")
    return df.sort_values(["artifact", "created_at", "run_id"]).reset_index(drop=True)


def latest_run(artifact: str, *, root: str | Path | None = None, complete: bool = True) -> str | None:
    df = list_runs(artifact, root=root)
    if complete:
        df = df[df["status"] == "complete"]
    return None if df.empty else str(df.iloc[-1]["run_id"])


def remove_run(artifact: str, run_id: str, *, root: str | Path | None = None) -> None:
    """Delete a run directory and its index row (for discarding a failed experiment deliberately)."""
    base = _root(root)
    shutil.rmtree(base / artifact / run_id, ignore_errors=True)
    fd = os.open(base, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _write_index(base, [r for r in _read_index(base) if (r["artifact"], r["run_id"]) != (artifact, run_id)])
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


__all__ = [
    "BASE_MODEL_ALIASES",
    "COMMITTED_ROOT",
    "DEFAULT_ROOT",
    "INDEX_COLUMNS",
    "TRAINING_ROLES",
    "Run",
    "RunWriter",
    "attach_notebook",
    "latest_run",
    "list_runs",
    "load_run",
    "new_run",
    "rebuild_index",
    "record_key",
    "remove_run",
    "reward_bounds",
    "training_curve",
    "training_init",
    "validate_record",
]
