"""The adversarial corpus (tests/data/adversarial/corpus.yaml): attacks on real official bundles, each of
which validate_bundle must reject with the expected diagnostics."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from tests.paths import VERIFIED
import yaml

from execcritic.bundle.model import TestBundle
from execcritic.harness.oracle.build import oracle_bundle
from execcritic.harness.validate import validate_bundle

CORPUS = Path(__file__).resolve().parents[1] / "data" / "adversarial" / "corpus.yaml"
DATA = VERIFIED
pytestmark = pytest.mark.skipif(not DATA.exists(), reason="SWE-bench Verified parquet not available")

ENTRIES = yaml.safe_load(CORPUS.read_text())


@lru_cache(maxsize=None)
def tasks():
    from execcritic.tasks import load_tasks

    return load_tasks(str(DATA))


def build(entry: dict) -> tuple[TestBundle, object]:
    task = tasks().get(entry["base"])
    official = oracle_bundle(task)
    patch = official.test_patch
    if "patch" in entry:
        patch = entry["patch"]
    if entry.get("patch_append_gold"):
        patch = patch + task.patch
    if "patch_append" in entry:
        patch = patch + entry["patch_append"]
    if "patch_replace" in entry:
        old, new = entry["patch_replace"]
        assert old in patch, f"{entry['id']}: {old!r} not in the test patch"
        patch = patch.replace(old, new)
    if "patch_huge" in entry:
        n = int(entry["patch_huge"])
        lines = [f"+{'0123456789abcdef' * 6} {i}" for i in range(n // 100 + 1)]
        patch += (
            "diff --git a/tests/data/huge.txt b/tests/data/huge.txt\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/tests/data/huge.txt\n@@ -0,0 +1,{len(lines)} @@\n" + "\n".join(lines) + "\n"
        )
    command = entry.get("command", "{official}").replace("{official}", official.command_line)
    if "contract_text" in entry:
        contract_text = entry["contract_text"]
    else:
        data = json.loads(official.contract_text)
        for key, value in (entry.get("contract") or {}).items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        contract_text = json.dumps(data)
    return TestBundle(patch, command, contract_text), (task if entry.get("task", True) else None)


def test_corpus_is_big_and_well_formed():
    assert len(ENTRIES) >= 40
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids))
    assert all(e.get("expect") for e in ENTRIES)


@pytest.mark.parametrize("base", sorted({e["base"] for e in ENTRIES}))
def test_unmodified_official_bundles_are_valid(base):
    """The attacks start from valid bundles, so each rejection is the attack's."""
    task = tasks().get(base)
    assert validate_bundle(oracle_bundle(task), task) == []


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_attack_is_rejected_with_specific_diagnostics(entry):
    bundle, task = build(entry)
    problems = validate_bundle(bundle, task)
    got = {p.code for p in problems}
    assert problems, f"{entry['id']} was accepted"
    missing = set(entry["expect"]) - got
    assert not missing, f"{entry['id']}: expected {sorted(missing)}, got {sorted(got)}"
    for p in problems:  # every diagnostic names its artifact and says something
        assert p.artifact in ("test.patch", "test_command", "test_contract.json") and len(p.message) > 10


def test_the_corpus_table_in_docs_is_current():
    """docs/adversarial_corpus.md is the runtime corpus as it is (regenerate: see its first lines)."""
    from pathlib import Path

    from tests.adversarial.runtime.table import markdown

    doc = Path(__file__).resolve().parents[2] / "docs" / "adversarial_corpus.md"
    assert doc.read_text() == markdown(), "regenerate: python -m tests.adversarial.runtime.table > " + str(doc)
