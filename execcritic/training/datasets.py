"""Training sets as pure transformations of records the pipeline already writes (no sandbox, no model).

- Test-agent SFT (§4.1, Table 7a, Table 4): teacher trajectories in the `execcritic-trajectory-1` format
  become TRL `SFTTrainer` chat rows `{"messages": [...], "tools": [BASH_TOOL]}`. Admission is the paper's:
  "Trajectory admission uses protocol validity and clean Base failure only. Gold outcomes do not filter the
  SFT trajectories" (§4.1; Table 7a "Gold filtering: Disabled"). Table 4 varies whether the teacher's
  reasoning is kept (`reasoning_visible`).
- Repair-agent RL (§4.2, Table 8, Table 6): one row per instance whose feedback is either one
  deterministically selected Oracle F2P test (Table 8c: "Source Oracle F2P, Tests per rollout 1, Test
  selection Deterministic") or a qualified generated Test bundle (Table 6, "Generated tests").

Malformed inputs raise `InputError` naming the file and the field.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execcritic.agents.loop import TRAJECTORY_FORMAT
from execcritic.agents.models.base import BASH_TOOL
from execcritic.config import PAPER
from execcritic.errors import InputError
from execcritic.tasks.model import Task

ROLES = ("system", "user", "assistant", "tool")
_THINK_RE = re.compile(r"<think>.*?(?:</think>|$)\s*", re.DOTALL)
_REASONING_KEYS = ("reasoning_content", "reasoning")

# ---- trajectories ---------------------------------------------------------------------------------


def _bad(message: str, source: str, fld: str | None) -> InputError:
    return InputError(message, file=source, field=fld)


def validate_trajectory(data: Any, source: str = "<memory>") -> dict[str, Any]:
    """Check the `execcritic-trajectory-1` shape that SFT conversion relies on: OpenAI chat messages,
    assistant `tool_calls` with JSON-object arguments, every `tool` message answering an earlier call."""
    if not isinstance(data, dict):
        raise _bad(f"a trajectory must be a JSON object, got {type(data).__name__}", source, None)
    if data.get("format") != TRAJECTORY_FORMAT:
        raise _bad(f"expected format {TRAJECTORY_FORMAT!r}, got {data.get('format')!r}", source, "format")
    if not isinstance(data.get("meta"), dict):
        raise _bad("meta must be an object", source, "meta")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages must be a non-empty list", source, "messages")
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise _bad("a message must be an object", source, where)
        role = m.get("role")
        if role not in ROLES:
            raise _bad(f"role must be one of {ROLES}, got {role!r}", source, f"{where}.role")
        content = m.get("content")
        if content is not None and not isinstance(content, str):
            raise _bad(f"content must be a string, got {type(content).__name__}", source, f"{where}.content")
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                raise _bad("tool_calls must be a list", source, f"{where}.tool_calls")
            for j, call in enumerate(calls):
                cw = f"{where}.tool_calls[{j}]"
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise _bad("a tool call needs function.name", source, f"{cw}.function")
                if not isinstance(call.get("id"), str) or not call["id"]:
                    raise _bad("a tool call needs an id", source, f"{cw}.id")
                _arguments(fn.get("arguments"), source, f"{cw}.function.arguments")
                open_calls.add(call["id"])
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if call_id not in open_calls:
                raise _bad(f"tool message answers no earlier tool call (tool_call_id={call_id!r})", source,
                           f"{where}.tool_call_id")
            open_calls.discard(call_id)
    if not any(m["role"] == "assistant" for m in messages):
        raise _bad("the trajectory has no assistant message", source, "messages")
    return data


def _arguments(raw: Any, source: str, where: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise _bad(f"tool-call arguments are not JSON ({exc})", source, where) from None
    if not isinstance(value, dict):
        raise _bad("tool-call arguments must be a JSON object", source, where)
    return value


def load_trajectory(path: str | Path) -> dict[str, Any]:
    """Read and validate one trajectory file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise _bad("trajectory file not found", str(path), None) from None
    except ValueError as exc:
        raise _bad(f"not JSON: {exc}", str(path), None) from None
    return validate_trajectory(data, str(path))


# ---- SFT ------------------------------------------------------------------------------------------


def sft_admission(record: Mapping[str, Any], source: str = "<memory>") -> tuple[bool, str]:
    """(admitted, reason) for a Test-agent generation record (`TestAgentResult.to_record`).

    Admitted iff the episode retained a bundle: a protocol-valid submission that failed cleanly on a fresh
    Base (`qualified` with `exit_status == "qualified"`). Nothing else is read: Gold audit fields, when
    present, never filter (§4.1)."""
    qualified, status = record.get("qualified"), record.get("exit_status")
    if not isinstance(qualified, bool):
        raise _bad(f"qualified must be a boolean, got {qualified!r}", source, "qualified")
    if not isinstance(status, str):
        raise _bad(f"exit_status must be a string, got {status!r}", source, "exit_status")
    if qualified != (status == "qualified"):
        raise _bad(f"qualified={qualified} contradicts exit_status={status!r}", source, "qualified")
    if not qualified:
        return False, f"not_qualified:{status}"
    if not record.get("trajectory"):
        return False, "no_trajectory"
    return True, "qualified"


def submitted_admission(record: Mapping[str, Any], source: str = "<memory>") -> tuple[bool, str]:
    """(admitted, reason) for a Test-agent generation record under `sft.admission = submitted`: a bundle the harness
    accepted and ran on Base (an attempt that reached the Base gate), qualified or not; Gold never filters."""
    sft_admission(record, source)        # the record's own consistency checks
    if not any(a.get("stage") == "base_gate" for a in record.get("attempts") or ()):
        return False, f"not_submitted:{record.get('exit_status')}"
    if not record.get("trajectory"):
        return False, "no_trajectory"
    return True, "submitted"


def repair_sft_admission(record: Mapping[str, Any], source: str = "<memory>") -> tuple[bool, str]:
    """(admitted, reason) for a Repair record (`pipeline.records.RepairRecord`): admitted iff the teacher's
    terminal patch passed the selected test in a valid local execution (`local_status == "pass"`) - the harness's
    own verdict, as the Test agent's admission is a clean Base failure; the official verdict never filters.
    The paper trains the Repair agent by RL only; this admission serves the CPU demonstration's SFT."""
    status = record.get("local_status")
    if not isinstance(status, str):
        raise _bad(f"local_status must be a string, got {status!r}", source, "local_status")
    if status != "pass":
        return False, f"not_passed:{record.get('final_reason')}"
    if not record.get("trajectory"):
        return False, "no_trajectory"
    return True, "passed"


ADMISSION = {"test": sft_admission, "repair": repair_sft_admission}
TEST_ADMISSION = {"qualified": sft_admission, "submitted": submitted_admission}   # sft.admission


def _strip_think(text: str) -> str:
    return _THINK_RE.sub("", text)


def sft_messages(trajectory: Mapping[str, Any], *, reasoning_visible: bool,
                 source: str = "<memory>") -> list[dict[str, Any]]:
    """The chat messages of one trajectory in the shape TRL's chat templates consume.

    Tool-call arguments become JSON objects (the Qwen3.5 template iterates them). With
    `reasoning_visible` the teacher's reasoning is kept (`<think>` spans in the content, and a `reasoning` /
    `reasoning_content` field as `reasoning_content`); without it both are removed (Table 4's "no CoT"
    condition). Messages after the last assistant turn are dropped, except the tool answers to its calls:
    they carry no supervised token and would end the example on a controller message."""
    validate_trajectory(dict(trajectory), source)
    out: list[dict[str, Any]] = []
    for m in trajectory["messages"]:
        role = m["role"]
        content = m.get("content") or ""
        if role == "assistant":
            msg: dict[str, Any] = {"role": "assistant",
                                   "content": content if reasoning_visible else _strip_think(content)}
            if reasoning_visible:
                reasoning = next((m[k] for k in _REASONING_KEYS if isinstance(m.get(k), str) and m[k]), None)
                if reasoning:
                    msg["reasoning_content"] = reasoning
            calls = []
            for c in m.get("tool_calls") or []:
                args = copy.deepcopy(_arguments(c["function"].get("arguments"), source, "tool_calls"))
                calls.append({"id": c["id"], "type": "function",
                              "function": {"name": c["function"]["name"], "arguments": args}})
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": content})
        else:
            out.append({"role": role, "content": content})
    last = max(i for i, m in enumerate(out) if m["role"] == "assistant")
    end = last + 1
    while end < len(out) and out[end]["role"] == "tool":
        end += 1
    return out[:end]


def _teacher_of(record: Mapping[str, Any], trajectory: Mapping[str, Any]) -> str | None:
    src = record.get("source")
    if isinstance(src, str) and src.startswith("model:"):
        return src[len("model:"):]
    model = (trajectory.get("meta") or {}).get("model")
    if isinstance(model, dict) and isinstance(model.get("model"), str):
        return model["model"]
    return None


def sft_example(record: Mapping[str, Any], trajectory: Mapping[str, Any], *, reasoning_visible: bool,
                teacher: str | None = None, source: str = "<memory>") -> dict[str, Any]:
    """One SFT row: `messages`, `tools` and the metadata columns `teacher`, `reasoning_visible`,
    `instance_id`. `teacher` defaults to the record's model source (`model:<spec>`)."""
    teacher = teacher or _teacher_of(record, trajectory)
    if not teacher:
        raise _bad("cannot tell the teacher model: pass teacher= or use a `model:<spec>` record source",
                   source, "source")
    instance = record.get("instance_id") or (trajectory.get("meta") or {}).get("instance_id")
    return {"messages": sft_messages(trajectory, reasoning_visible=reasoning_visible, source=source),
            "tools": [copy.deepcopy(BASH_TOOL)], "teacher": teacher, "reasoning_visible": reasoning_visible,
            "instance_id": instance}


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Records of a JSONL file (e.g. the pipeline's generation.jsonl); a bad line names its number."""
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise _bad(f"line {n} is not JSON: {exc}", str(path), f"line {n}") from None
        if not isinstance(value, dict):
            raise _bad(f"line {n} is not a JSON object", str(path), f"line {n}")
        out.append(value)
    return out


@dataclass
class SFTSet:
    rows: list[dict[str, Any]] = field(default_factory=list)
    rejected: Counter = field(default_factory=Counter)

    def stats(self) -> dict[str, Any]:
        return {"admitted": len(self.rows), "rejected": dict(sorted(self.rejected.items()))}


def build_sft_set(generation_jsonl: str | Path, *, reasoning_visible: bool, teacher: str | None = None,
                  trajectory_root: str | Path | None = None, limit: int | None = PAPER.sft.trajectories,
                  agent: str = "test", admission: str = PAPER.sft.admission) -> SFTSet:
    """SFT rows from a record file in file order: the Test agent's generation records (`agent="test"`) or the
    Repair records of `execcritic run` (`agent="repair"`, `repair_sft_admission`). `limit` keeps the first N
    admitted (Figure 6a's data-size sweep; Table 7a's 5,000 by default; None keeps all). Relative trajectory
    paths resolve against `trajectory_root` (default: the current directory, where the pipeline writes from).
    `admission` (`sft.admission`) picks the Test agent's rule."""
    if agent not in ADMISSION:
        raise InputError(f"agent must be one of {sorted(ADMISSION)}, got {agent!r}", field="agent")
    admit = TEST_ADMISSION[admission] if agent == "test" else ADMISSION[agent]
    root = Path(trajectory_root) if trajectory_root is not None else Path.cwd()
    out = SFTSet()
    for n, record in enumerate(read_jsonl(generation_jsonl), 1):
        if limit is not None and len(out.rows) >= limit:
            break
        ok, reason = admit(record, f"{generation_jsonl}:{n}")
        if not ok:
            out.rejected[reason.split(":")[0]] += 1
            continue
        path = Path(record["trajectory"])
        path = path if path.is_absolute() else root / path
        out.rows.append(sft_example(record, load_trajectory(path), reasoning_visible=reasoning_visible,
                                    teacher=teacher, source=str(path)))
    return out


# ---- Repair RL ------------------------------------------------------------------------------------


def _selectable(node: str) -> bool:
    """A node an exact selector can bind: brackets and parentheses balanced (SWE-ReBench truncates some
    names at a space, e.g. `test_parse[select`)."""
    return node.strip() == node and node.count("[") == node.count("]") and node.count("(") == node.count(")")


def oracle_f2p_node(row: Mapping[str, Any], source: str | None = None) -> str:
    """The single Oracle F2P test of a Repair rollout (Table 8c: 1 test, "Deterministic"): the first
    FAIL_TO_PASS entry, in the row's own order, that an exact selector can bind. A function of the row
    alone, so every rollout of the group (and every rerun) gets the same test."""
    task = Task.from_row(row, source=source)
    for node in task.fail_to_pass:
        if _selectable(node):
            return node
    raise InputError("no FAIL_TO_PASS entry is a selectable test name (all truncated)", file=source,
                     instance=task.instance_id, field="FAIL_TO_PASS")


def _verifier_fields(task: Task) -> dict[str, Any]:
    """What only the training harness sees (Table 8a "Verifier-only metadata"): the official test patch and
    lists, the environment keys. Gold's source patch is left out: no Repair reward needs it."""
    row = task.to_row()
    for key in ("patch", "problem_statement", "hints_text"):
        row.pop(key, None)
    row["FAIL_TO_PASS"] = list(task.fail_to_pass)
    row["PASS_TO_PASS"] = list(task.pass_to_pass)
    return row


def repair_rl_row(row: Mapping[str, Any], source: str | None = None) -> dict[str, Any]:
    """Main configuration (Table 8): the problem statement as the only input field, one Oracle F2P test."""
    task = Task.from_row(row, source=source)
    return {"instance_id": task.instance_id, "problem_statement": task.problem_statement,
            "feedback": {"source": "oracle_f2p", "test_nodes": [oracle_f2p_node(row, source)]},
            "verifier": _verifier_fields(task)}


def repair_rl_row_generated(row: Mapping[str, Any], record: Mapping[str, Any],
                            source: str | None = None) -> dict[str, Any]:
    """Table 6's "Generated tests" variant: the feedback is a qualified generated bundle (a generation
    record of the same instance). Qualification is the Base gate only; Gold never selects it."""
    task = Task.from_row(row, source=source)
    if record.get("instance_id") != task.instance_id:
        raise InputError(f"generation record is for {record.get('instance_id')!r}", file=source,
                         instance=task.instance_id, field="instance_id")
    ok, reason = sft_admission(record, source or "<memory>")
    bundle = record.get("bundle")
    if not ok and reason != "no_trajectory":
        raise InputError(f"the generation record has no qualified bundle ({reason})", file=source,
                         instance=task.instance_id, field="qualified")
    if not isinstance(bundle, dict) or not all(isinstance(bundle.get(k), str) and bundle[k]
                                               for k in ("test_patch", "test_command", "test_contract")):
        raise InputError("bundle needs test_patch, test_command and test_contract", file=source,
                         instance=task.instance_id, field="bundle")
    return {"instance_id": task.instance_id, "problem_statement": task.problem_statement,
            "feedback": {"source": "generated", "generator": record.get("source"),
                         "bundle": {k: bundle[k] for k in ("test_patch", "test_command", "test_contract")},
                         "bundle_digest": bundle.get("digest")},
            "verifier": _verifier_fields(task)}


def qualified_bundles(generation_records: Iterable[Mapping[str, Any]], *, generator: str | None = None,
                      source: str | None = None) -> dict[str, Mapping[str, Any]]:
    """instance id -> the generation record of its qualified generated bundle (Table 6's "Generated tests"
    feedback), from `generator` (a record `source`, e.g. `model:<spec>`) when given. Two qualified bundles for
    one instance are an error: which one a Repair rollout trains on must not depend on file order."""
    bundles: dict[str, Mapping[str, Any]] = {}
    for rec in generation_records:
        if generator is not None and rec.get("source") != generator:
            continue
        if rec.get("qualified") is not True or not rec.get("bundle"):
            continue
        iid = str(rec.get("instance_id"))
        if iid in bundles:
            raise InputError("two qualified generated bundles for one instance (from "
                             f"{bundles[iid].get('source')!r} and {rec.get('source')!r}); name the generator",
                             file=source, instance=iid, field="source")
        bundles[iid] = rec
    return bundles


@dataclass
class RepairSet:
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)


def build_repair_rl_set(rows: Iterable[Mapping[str, Any]], *, feedback: str = "oracle_f2p",
                        generation_records: Iterable[Mapping[str, Any]] = (), generator: str | None = None,
                        source: str | None = None) -> RepairSet:
    """Repair RL rows in input order. `feedback="oracle_f2p"` (main; an instance whose FAIL_TO_PASS names
    are all truncated is skipped and counted) or `"generated"` (Table 6), where an instance without a
    qualified bundle from `generator` (a record `source`, e.g. `model:<spec>`) is skipped and counted; two
    qualified bundles for one instance and generator are an error (which one to train on must not depend on
    file order)."""
    if feedback not in ("oracle_f2p", "generated"):
        raise InputError(f"feedback must be 'oracle_f2p' or 'generated', got {feedback!r}", field="feedback")
    out = RepairSet()
    rows = list(rows)
    if feedback == "oracle_f2p":
        for r in rows:
            if not any(_selectable(n) for n in Task.from_row(r, source=source).fail_to_pass):
                out.skipped["no_selectable_f2p"] += 1  # every F2P name truncated: nothing to select exactly
                continue
            out.rows.append(repair_rl_row(r, source))
        return out
    bundles = qualified_bundles(generation_records, generator=generator, source=source)
    for r in rows:
        iid = str(r.get("instance_id"))
        if iid not in bundles:
            out.skipped["no_qualified_bundle"] += 1
            continue
        out.rows.append(repair_rl_row_generated(r, bundles[iid], source))
    return out
