"""Load task rows from a local parquet/JSONL/JSON file or a Hugging Face dataset id.

Local files are the tested path here; hub access (`datasets.load_dataset`) is the user's business.
Every loaded set carries a content hash so result manifests can name exactly what was run.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from execcritic.errors import InputError, check_size
from execcritic.hashing import file_sha256
from execcritic.limits import MAX_ROW_BYTES
from execcritic.tasks.model import Task

DATA_SUFFIXES = (".parquet", ".jsonl", ".ndjson", ".json")
# Short names users type; they resolve to hub ids (or to a local copy via $EXECCRITIC_DATA_DIR).
HUB_ALIASES = {
    "verified": "SWE-bench/SWE-bench_Verified",
    "lite": "SWE-bench/SWE-bench_Lite",
    "multilingual": "SWE-bench/SWE-bench_Multilingual",
    "full": "SWE-bench/SWE-bench",
}


@dataclass(frozen=True)
class TaskSet:
    source: str                    # the path or hub id the rows came from
    split: str
    tasks: tuple[Task, ...]
    sha256: str                    # of the file bytes, or of the canonical rows for hub datasets
    skipped: tuple[tuple[str, str], ...] = ()   # (instance_id, reason) of rows left out with on_error="skip"

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def get(self, instance_id: str) -> Task:
        for task in self.tasks:
            if task.instance_id == instance_id:
                return task
        raise InputError(f"instance not found in {self.source} ({len(self.tasks)} rows)", file=self.source,
                         instance=instance_id)

    def select(self, instance_ids: Iterable[str] | None) -> "TaskSet":
        if instance_ids is None:
            return self
        wanted = list(instance_ids)
        picked = tuple(self.get(i) for i in wanted)
        return TaskSet(self.source, self.split, picked, self.sha256, self.skipped)

    def manifest(self) -> dict[str, Any]:
        """What a result records of its rows: where they came from, portably (a local file by its name or its
        path inside the working directory, never a host path), and the content hash that identifies them."""
        return {"source": portable_source(self.source), "split": self.split, "rows": len(self.tasks),
                "sha256": self.sha256, "skipped_rows": [list(s) for s in self.skipped]}


def portable_source(source: str) -> str:
    """`verified-sdist:/abs/dir/verified_test.parquet` -> `verified-sdist:verified_test.parquet (local file)`;
    a path under the working directory stays relative; a hub id is unchanged."""
    prefix, sep, rest = source.partition(":") if ":" in source and not source.startswith("/") else ("", "", source)
    if not Path(rest).is_absolute():
        return source
    path = Path(rest)
    try:
        shown = str(path.relative_to(Path.cwd()))
    except ValueError:
        shown = f"{path.name} (local file)"
    return f"{prefix}{sep}{shown}"


def _rows_from_file(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise InputError(f"unsupported dataset file type {suffix!r}; use .parquet, .jsonl or .json", file=str(path))
    if suffix == ".parquet":
        import pandas as pd  # lazy: pandas (slow import)

        try:
            return [_row(r, path, f"row {i}") for i, r in enumerate(pd.read_parquet(path).to_dict(orient="records"), 1)]
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a file that is not parquet
            raise InputError(f"not a readable parquet file ({type(exc).__name__}: {str(exc)[:200]})",
                             file=str(path)) from None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=str(path)) from None
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            check_size(f"line {lineno}", len(line), MAX_ROW_BYTES, file=str(path), field=f"line {lineno}")
            try:
                rows.append(_row(json.loads(line), path, f"line {lineno}"))
            except json.JSONDecodeError as exc:
                raise InputError(f"line {lineno} is not JSON ({exc.msg})", file=str(path)) from exc
        return rows
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON ({exc.msg} at line {exc.lineno})", file=str(path)) from None
        if isinstance(data, dict):        # {"rows": [...]}, {"data": [...]} or {instance_id: row, ...}
            listed = data.get("rows", data.get("data"))
            if isinstance(listed, list):
                data = listed
            elif data and all(isinstance(v, dict) for v in data.values()):
                data = list(data.values())
        if not isinstance(data, list):
            raise InputError("expected a JSON list of SWE-bench rows (or {\"rows\": [...]}, or rows by instance id), got a "
                             f"JSON {type(data).__name__}", file=str(path))
        return [_row(r, path, f"row {i}") for i, r in enumerate(data, 1)]
    raise InputError(f"unsupported dataset file type {suffix!r}; use .parquet, .jsonl or .json", file=str(path))


def _row(row: Any, path: Path, where: str) -> dict[str, Any]:
    """One row of a dataset file: a JSON object (a SWE-bench row) of a sane size."""
    if not isinstance(row, dict):
        raise InputError(f"{where} is not a SWE-bench row (a JSON object with instance_id, repo, ...): got "
                         f"{json.dumps(row, default=str)[:60]}", file=str(path), field=where)
    check_size(where, len(json.dumps(row, default=str)), MAX_ROW_BYTES, file=str(path), field=where)
    return row


def _rows_from_hub(name: str, split: str) -> list[dict[str, Any]]:
    try:
        import datasets  # lazy: HF datasets (slow import)
    except ImportError as exc:  # pragma: no cover - datasets is a core dependency
        raise InputError("loading a hub dataset needs the 'datasets' package", file=name) from exc
    if os.environ.get("HF_HUB_OFFLINE") != "1" and not _hub_reachable():
        hint = [a for a, hub in HUB_ALIASES.items() if hub == name]
        fix = f"set ${alias_variable(hint[0])} to a local copy" if hint else "give a local parquet/JSONL file"
        raise InputError(f"the Hugging Face hub cannot be reached, so {name!r} cannot be loaded: {fix} (or set "
                         "HF_HUB_OFFLINE=1 to use the datasets cache)", file=name)
    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as exc:  # hub errors are many; report them as input errors with the id
        raise InputError(f"could not load hub dataset {name!r} split {split!r}: {exc}", file=name) from exc
    return [dict(r) for r in ds]


def alias_variable(alias: str) -> str:
    """The environment variable that points an alias at a local copy: `verified` -> EXECCRITIC_VERIFIED."""
    return f"EXECCRITIC_{alias.upper()}"


def _hub_reachable(timeout_s: float = 5.0) -> bool:
    """One quick request, so that an offline machine fails in seconds instead of after the hub client's
    retries."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    try:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/api/health", method="HEAD"), timeout=timeout_s)
    except urllib.error.HTTPError:
        return True                     # it answered
    except OSError:
        return False
    return True


def resolve_source(source: str) -> str:
    """A path if it exists; an alias (`verified`) is its variable's value when set (a local copy or another
    id: $EXECCRITIC_VERIFIED), else its hub id; anything else is taken as a hub id."""
    if Path(source).expanduser().exists():
        return str(Path(source).expanduser())
    if source in HUB_ALIASES:
        local = os.environ.get(alias_variable(source))
        return resolve_source(local) if local and local != source else HUB_ALIASES[source]
    return source


def load_tasks(source: str, split: str = "test", instance_ids: Sequence[str] | None = None,
               on_error: str = "raise") -> TaskSet:
    """Load and validate every row. A bad row raises an InputError naming it (`on_error="raise"`), or is
    left out and listed in `TaskSet.skipped` with the reason (`on_error="skip"`, e.g. the one official
    Multilingual row with an empty FAIL_TO_PASS)."""
    if on_error not in ("raise", "skip"):
        raise ValueError("on_error must be 'raise' or 'skip'")
    if source not in _NAMED_TASK_SETS and source in _BUILTIN_TASK_SETS:

        importlib.import_module(_BUILTIN_TASK_SETS[source])  # registers itself
    if source in _NAMED_TASK_SETS:
        return _NAMED_TASK_SETS[source](split=split, instance_ids=instance_ids)
    resolved = resolve_source(source)
    path = Path(resolved)
    if path.exists():
        rows = _rows_from_file(path)
        digest = file_sha256(path)
    else:
        if source.startswith(("/", "./", "../", "~")) or Path(source).suffix.lower() in DATA_SUFFIXES:
            raise InputError("no such dataset file", file=source, field="--dataset")
        if "/" not in resolved:
            raise InputError(f"no such file, and {source!r} is not a hub dataset id (owner/name) or one of "
                             f"{sorted(HUB_ALIASES) + sorted(_NAMED_TASK_SETS)}", file=source)
        rows = _rows_from_hub(resolved, split)
        digest = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    if not rows:
        raise InputError(f"the dataset {'file' if path.exists() else f'split {split!r}'} holds no rows: a run over "
                         "no tasks would report nothing", file=resolved, field="--dataset")
    tasks = []
    skipped: list[tuple[str, str]] = []
    seen: set[str] = set()
    for row in rows:
        try:
            task = Task.from_row(row, source=resolved)
        except InputError as exc:
            if on_error == "raise":
                raise
            skipped.append((str(row.get("instance_id")), str(exc)))
            continue
        if task.instance_id in seen:
            raise InputError("duplicate instance_id", file=resolved, instance=task.instance_id,
                             field="instance_id")
        seen.add(task.instance_id)
        tasks.append(task)
    return TaskSet(resolved, split, tuple(tasks), digest, tuple(skipped)).select(instance_ids)


# Task sets defined by the suite itself (`verified-sdist`, `verified-git`, `multilingual-git`) register a loader here.
_NAMED_TASK_SETS: dict[str, Any] = {}
# Suite task sets registered on first use (module imported lazily: it may be heavy).
_BUILTIN_TASK_SETS = {"verified-sdist": "execcritic.tasks.sdist", "verified-git": "execcritic.tasks.git",
                      "multilingual-git": "execcritic.tasks.mlgit"}


def register_task_set(name: str, loader) -> None:
    _NAMED_TASK_SETS[name] = loader
