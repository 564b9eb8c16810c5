"""validate_bundle: every problem reported with a stable code; valid bundles for each Python runner."""

from __future__ import annotations

import json

import pytest

from tests.paths import VERIFIED, needs_rows

from execcritic.bundle.model import TestBundle
from execcritic.harness.validate import validate_bundle
from execcritic.config import HarnessConfig

DATA = VERIFIED

CONTRACT = {
    "entrypoint": "flask.Blueprint(name, import_name)",
    "trigger": "an empty blueprint name",
    "expected_output": "ValueError is raised",
    "issue_evidence": ["Require a non-empty name for Blueprints"],
    "alternative_hypotheses": ["the name is validated later, at registration"],
    "non_assertions": ["the error message text"],
    "test_nodes": ["test_empty_name_not_allowed"],
}
FLASK_PATCH = """diff --git a/tests/test_blueprints.py b/tests/test_blueprints.py
--- a/tests/test_blueprints.py
+++ b/tests/test_blueprints.py
@@ -256,6 +256,11 @@ def test_dotted_name_not_allowed(app, client):
         flask.Blueprint("app.ui", __name__)
 
 
+def test_empty_name_not_allowed(app, client):
+    with pytest.raises(ValueError):
+        flask.Blueprint("", __name__)
+
+
 def test_dotted_names_from_app(app, client):
     test = flask.Blueprint("test", __name__)
 
"""
FLASK_CMD = "pytest -rA tests/test_blueprints.py::test_empty_name_not_allowed"


def bundle(patch=FLASK_PATCH, command=FLASK_CMD, **contract):
    return TestBundle(patch, command, json.dumps({**CONTRACT, **contract}))


def codes(b, task=None, **kw):
    return [p.code for p in validate_bundle(b, task, **kw)]


@pytest.fixture(scope="module")
def verified():
    from execcritic.tasks import load_tasks

    return load_tasks(str(DATA))


def test_valid_bundle_with_bare_and_full_names():
    assert codes(bundle()) == []
    assert codes(bundle(test_nodes=["tests/test_blueprints.py::test_empty_name_not_allowed"])) == []


@needs_rows
def test_valid_bundle_for_its_task(verified):
    assert codes(bundle(), verified.get("pallets__flask-5014")) == []


def test_every_problem_is_reported_at_once():
    b = TestBundle(
        FLASK_PATCH + "diff --git a/src/flask/app.py b/src/flask/app.py\n--- a/src/flask/app.py\n"
        "+++ b/src/flask/app.py\n@@ -1 +1 @@\n-a\n+b\n",
        "pytest tests/test_blueprints.py || true",
        json.dumps({**CONTRACT, "trigger": ""}),
    )
    got = set(codes(b))
    assert {"patch.source_edit", "command.chaining", "contract.empty_field"} <= got


def test_binding_problems():
    assert "binding.unbound" in codes(bundle(test_nodes=["test_empty_name_not_allowed", "test_other"]))
    assert "binding.undeclared_selected" in codes(
        bundle(command=FLASK_CMD + " tests/test_blueprints.py::test_dotted_name_not_allowed")
    )
    assert "binding.undeclared_added" in codes(
        bundle(
            command="pytest tests/test_blueprints.py::test_dotted_name_not_allowed",
            test_nodes=["test_dotted_name_not_allowed"],
        )
    )
    assert "binding.not_a_node" in codes(
        bundle(test_nodes=["test_empty_name_not_allowed", "tests/test_blueprints.py"])
    )


def test_existing_nodes_may_be_declared_for_fixture_edits():
    data_patch = (
        "diff --git a/tests/static/data.json b/tests/static/data.json\n--- a/tests/static/data.json\n"
        '+++ b/tests/static/data.json\n@@ -1 +1 @@\n-{}\n+{"a": 1}\n'
    )
    b = bundle(
        patch=data_patch,
        command="pytest tests/test_basic.py::test_static_files",
        test_nodes=["test_static_files"],
    )
    assert codes(b) == []


def test_selector_levels_are_reported():
    assert "selector.file" in codes(bundle(command="pytest tests/test_blueprints.py"))
    assert "selector.directory" in codes(bundle(command="pytest tests"))
    assert "selector.suite" in codes(bundle(command="pytest"))
    assert "selector.pattern" in codes(bundle(command="pytest tests/test_blueprints.py -k empty_name"))
    assert "selector.duplicate" in codes(
        bundle(command=FLASK_CMD + " tests/test_blueprints.py::test_empty_name_not_allowed")
    )


def test_duplicate_nodes_by_meaning():
    c = codes(
        bundle(
            test_nodes=[
                "test_empty_name_not_allowed",
                "tests/test_blueprints.py::test_empty_name_not_allowed",
            ]
        )
    )
    assert "contract.duplicate_nodes" in c  # a bare name and its full id name one test
    c = codes(
        bundle(
            test_nodes=[
                "tests/test_blueprints.py::test_empty_name_not_allowed",
                "./tests/test_blueprints.py::test_empty_name_not_allowed",
            ]
        )
    )
    assert "contract.duplicate_nodes" in c  # two spellings of one full id
    c = codes(bundle(test_nodes=["test_empty_name_not_allowed", "test_empty_name_not_allowed"]))
    assert "contract.duplicate_nodes" in c  # the same text twice


def test_unrecognized_runner_and_limits():
    assert "runner.unrecognized" in codes(bundle(command="python -c 'print(1)'"))
    assert "patch.too_large" in codes(bundle(), config=HarnessConfig(max_test_patch_bytes=100))
    assert "command.too_long" in codes(bundle(), config=HarnessConfig(max_command_chars=20))


@needs_rows
def test_runner_must_fit_the_task(verified):
    django_task = verified.get("django__django-16901")
    assert "runner.mismatch" in codes(bundle(), django_task)


DJANGO_PATCH = """diff --git a/tests/xor_lookups/tests.py b/tests/xor_lookups/tests.py
--- a/tests/xor_lookups/tests.py
+++ b/tests/xor_lookups/tests.py
@@ -19,6 +19,13 @@ def test_filter(self):
             self.numbers[:3] + self.numbers[8:],
         )
 
+    def test_filter_multiple(self):
+        qs = Number.objects.filter(
+            Q(num__gte=1)
+            ^ Q(num__gte=3)
+        )
+        self.assertCountEqual(qs, self.numbers[1:3])
+
     def test_filter_negated(self):
         self.assertCountEqual(
             Number.objects.filter(Q(num__lte=7) ^ ~Q(num__lt=3)),
"""


@pytest.mark.parametrize(
    "command,nodes,expected",
    [
        (
            "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 xor_lookups.tests.XorLookupsTests.test_filter_multiple",
            ["test_filter_multiple"],
            [],
        ),
        (
            "cd /testbed/tests && python runtests.py xor_lookups.tests.XorLookupsTests.test_filter_multiple -v 2",
            ["test_filter_multiple (xor_lookups.tests.XorLookupsTests)"],
            [],
        ),
        (
            "./tests/runtests.py xor_lookups.tests.XorLookupsTests.test_filter_multiple",
            ["xor_lookups.tests.XorLookupsTests.test_filter_multiple"],
            [],
        ),
        (
            "./tests/runtests.py xor_lookups.tests.XorLookupsTests.test_filter_multiple",
            ["test_filter_multiple (xor_lookups.tests.OtherTests)"],
            ["binding.unbound", "binding.undeclared_selected"],
        ),
        (
            "./tests/runtests.py xor_lookups.tests",
            ["test_filter_multiple"],
            ["selector.file", "binding.unbound"],
        ),
        (
            "./tests/runtests.py xor_lookups.tests.XorLookupsTests",
            ["test_filter_multiple"],
            ["selector.class", "binding.unbound"],
        ),
    ],
)
def test_django_bundles(command, nodes, expected):
    got = codes(TestBundle(DJANGO_PATCH, command, json.dumps({**CONTRACT, "test_nodes": nodes})))
    assert sorted(set(got)) == sorted(expected)


SYMPY_PATCH = """diff --git a/sympy/core/tests/test_arit.py b/sympy/core/tests/test_arit.py
--- a/sympy/core/tests/test_arit.py
+++ b/sympy/core/tests/test_arit.py
@@ -1913,6 +1913,9 @@ def test_Mod():
     assert Mod(x, y).rewrite(floor) == x - y*floor(x/y)
     assert ((x - Mod(x, y))/y).rewrite(floor) == floor(x/y)
 
+    # issue 21373
+    assert Mod(x, 1).func is Mod
+
 
 def test_Mod_Pow():
     # modular exponentiation
"""


def test_sympy_overmatch_must_be_declared():
    cmd = "bin/test -C --verbose sympy/core/tests/test_arit.py -k test_Mod"
    got = codes(TestBundle(SYMPY_PATCH, cmd, json.dumps({**CONTRACT, "test_nodes": ["test_Mod"]})))
    assert got == ["selector.overmatch"]  # `-k test_Mod` also runs test_Mod_Pow (visible above)
    ok = TestBundle(
        SYMPY_PATCH,
        cmd + " test_Mod_Pow",
        json.dumps({**CONTRACT, "test_nodes": ["test_Mod", "test_Mod_Pow"]}),
    )
    assert codes(ok) == []


def test_sympy_overmatch_uses_the_base_file_when_given():
    cmd = "bin/test sympy/core/tests/test_arit.py -k test_Mod test_Mod_Pow"
    b = TestBundle(SYMPY_PATCH, cmd, json.dumps({**CONTRACT, "test_nodes": ["test_Mod", "test_Mod_Pow"]}))
    base = {
        "sympy/core/tests/test_arit.py": "def test_Mod():\n    pass\n\ndef test_Mod_is_integer():\n    pass\n"
    }
    assert codes(b) == []
    assert codes(b, read_base=base.get) == ["selector.overmatch"]
