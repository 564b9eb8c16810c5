r"""PHPUnit (carbon, laravel, php-cs-fixer, phpspreadsheet): node ids are *testdox* names,
`Class > Method name [with data set "x"]` (SWE-bench runs `--testdox` and parses its ✔/✘ lines).

Selection rule (PHPUnit 9-11 NameFilterIterator): `--filter F` is matched (preg_match, a search)
against `Fully\Qualified\ClassTest::testMethod` plus ` with data set "name"` / ` with data set #N` for
data-provider runs. A filter that is not itself a delimited regex is rewritten (`#N`/`@name`
shorthands) and wrapped as `/F/i` - a case-insensitive substring. So node level is only a delimited,
flag-less regex of this form:
    /^Full\\Namespace\\ClassTest::(?:testA|testB with data set "x")$/
    /(?:^|\\)ClassTest::testA$/          (short class name: needs exactly one test file argument)
A method alternative may end in `(?: with data set .*)?` = that method with all its data sets.
Anything else (`--filter custom`, unanchored, `/.../i`) is `pattern`; a file argument alone is
`file`, a directory `directory`, `--testsuite` `suite`.
Refused: `--list-*` (run nothing), `--no-output`/`--no-results` (hide results), `--repeat` is kept.

Binding: a selected (class, method[, data set]) binds a declared testdox id when PHPUnit's own
prettifier (NamePrettifier: strip `test`/`test_`, split camelCase, strip the class's `Test` suffix)
gives that id. build_command finds the method behind a testdox name in the row's test patch (the
patch's `function test...` lines, prettified); a name whose method the patch does not show cannot be
mapped back (prettifying loses case and underscores) and is refused.

Results: swebench's `parse_log_phpunit` (testdox). observed_command adds `--testdox --colors=never`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from execcritic.bundle.command import ParsedCommand
from execcritic.bundle.nodes import Node, Selection, Selector
from execcritic.errors import InputError
from execcritic.runners import _ml
from execcritic.runners._ml import OK, OKV, Opt, reject
from execcritic.runners.base import Runner

if TYPE_CHECKING:  # pragma: no cover
    from execcritic.tasks.model import Task

_OPTS: dict[str, Opt] = {
    "--filter": Opt(True, "select"),
    "--testsuite": Opt(True, "select"),
    **{
        k: OKV
        for k in (
            "-c",
            "--configuration",
            "--bootstrap",
            "--group",
            "--exclude-group",
            "--order-by",
            "--random-order-seed",
            "--log-junit",
            "--log-teamcity",
            "--testdox-html",
            "--testdox-text",
            "--testdox-xml",
            "--include-path",
            "-d",
            "--cache-directory",
            "--coverage-clover",
            "--coverage-html",
            "--coverage-text",
            "--coverage-xml",
            "--coverage-php",
            "--extension",
            "--test-suffix",
            "--columns",
            "--printer",
            "--repeat",
            "--log-events-text",
            "--log-events-verbose-text",
            "--exclude-testsuite",
            "--covers",
            "--uses",
        )
    },
    **{
        k: OK
        for k in (
            "--testdox",
            "--no-coverage",
            "-v",
            "--verbose",
            "--debug",
            "--stop-on-failure",
            "--stop-on-error",
            "--stop-on-defect",
            "--stop-on-warning",
            "--stop-on-risky",
            "--stop-on-skipped",
            "--stop-on-incomplete",
            "--fail-on-warning",
            "--fail-on-risky",
            "--fail-on-empty-test-suite",
            "--fail-on-deprecation",
            "--fail-on-notice",
            "--fail-on-skipped",
            "--fail-on-incomplete",
            "--dont-report-useless-tests",
            "--do-not-cache-result",
            "--cache-result",
            "--process-isolation",
            "--no-configuration",
            "--disallow-test-output",
            "--strict-coverage",
            "--strict-global-state",
            "--disallow-todo-tests",
            "--enforce-time-limit",
            "--disable-coding-standards-ignore",
            "--teamcity",
            "--no-extensions",
            "--no-logging",
            "--no-progress",
            "--path-coverage",
            "--display-deprecations",
            "--display-warnings",
            "--display-notices",
            "--display-errors",
            "--display-incomplete",
            "--display-skipped",
            "--display-all-issues",
            "--reverse-list",
            "--resolve-dependencies",
            "--ignore-dependencies",
            "--globals-backup",
            "--static-backup",
            "--colors",
            "--no-interaction",
            "--warm-coverage-cache",
        )
    },
    **{
        k: reject("lists and runs nothing")
        for k in ("--list-tests", "--list-tests-xml", "--list-suites", "--list-groups", "--list-test-files")
    },
    "--no-output": reject("hides the results the harness reads"),
    "--no-results": reject("hides the results the harness reads"),
    "--generate-configuration": reject("runs nothing"),
    "--migrate-configuration": reject("runs nothing"),
    "-h": reject("runs nothing"),
    "--help": reject("runs nothing"),
    "--version": reject("runs nothing"),
}
DS_ANY = "(?: with data set .*)?"
_DS = re.compile(r"^(?P<m>.*?)(?P<ds> with data set (?:\".*\"|#\d+))$")


def _phpunit_args(cmd: ParsedCommand) -> list[str] | None:
    argv = list(cmd.argv)
    if not argv:
        return None
    if _ml.basename(argv[0]) == "phpunit":
        return argv[1:]
    if (
        _ml.basename(argv[0]) in ("php", "php8", "php7")
        and len(argv) > 1
        and _ml.basename(argv[1]) == "phpunit"
    ):
        return argv[2:]
    return None


# ---- PHPUnit's testdox prettifier (NamePrettifier, PHPUnit 9/10) -----------------------------------


def prettify_method(name: str) -> str:
    if name.startswith("test_"):
        name = name[5:]
    elif name.startswith("test"):
        name = name[4:]
    if not name:
        return ""
    name = name[0].upper() + name[1:]
    if "_" in name:
        return name.replace("_", " ").strip()
    out, was_numeric = [], False
    for i, ch in enumerate(name):
        if i > 0 and "A" <= ch <= "Z":
            out.append(" " + ch.lower())
            continue
        is_numeric = ch.isdigit()
        if not was_numeric and is_numeric:
            out.append(" ")
            was_numeric = True
        if was_numeric and not is_numeric:
            was_numeric = False
        out.append(ch)
    return "".join(out)


def prettify_class(name: str) -> str:
    short = name.rsplit("\\", 1)[-1]
    short = short.removesuffix("Test")
    if short.startswith("Tests"):
        short = short[5:]
    elif short.startswith("Test"):
        short = short[4:]
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", short or "UnnamedTests")


def _method_testdox_variants(method: str) -> set[str]:
    """PHPUnit drops trailing digits of a method whose digit-less name it has already seen; accept both."""
    out = {prettify_method(method)}
    stripped = re.sub(r"\d+$", "", method)
    if stripped != method:
        out.add(prettify_method(stripped))
    return out


def split_testdox(text: str) -> tuple[str, str, str | None]:
    """`Class > Method name with data set "x"` -> ('Class', 'Method name', ' with data set "x"')."""
    cls, _, rest = text.strip().partition(" > ")
    m = _DS.match(rest)
    if m:
        return cls, m.group("m"), m.group("ds")
    return cls, rest, None


_INV_PREFIX = "(?:test_|test)?(?:"
_TESTDOX_MARK = "#testdox"


def testdox_method_regex(t: str) -> str | None:
    """A regex matching exactly the PHP method names that PHPUnit's prettifier turns into `t`.

    prettify: drop a `test_`/`test` prefix, upper-case the first character, then either replace `_`
    by spaces (names with an underscore) or split camelCase (`FloorYear` -> `Floor year`, a space
    before each digit run). Inverting both branches gives `(?:test_|test)?(?:CAMEL|SNAKE)`, e.g.
    `Floor year` -> `(?:test_|test)?(?:[Ff]loorYear|[Ff]loor_year_*)`. None when `t` cannot come from
    the prettifier in a way we can invert (leading `test`, characters other than letters, digits
    and single spaces).
    """
    if not t or not re.fullmatch(r"[A-Za-z0-9]+(?: [A-Za-z0-9]+)*", t) or t.lower().startswith("test"):
        return None
    if not ("A" <= t[0] <= "Z"):
        return None
    head = f"[{t[0]}{t[0].lower()}]"
    camel: list[str] | None = [head]
    prev_digit, i = False, 1
    while i < len(t):
        ch = t[i]
        if ch == " ":
            nxt = t[i + 1]
            if "a" <= nxt <= "z":
                camel.append(nxt.upper())
                prev_digit = False
            elif nxt.isdigit() and not prev_digit:
                camel.append(nxt)
                prev_digit = True
            else:
                camel = None
                break
            i += 2
            continue
        if "A" <= ch <= "Z" or (ch.isdigit() and not prev_digit):
            camel = None
            break
        prev_digit = ch.isdigit()
        camel.append(ch)
        i += 1
    snake = head + t[1:].replace(" ", "_") + ("_*" if " " in t else "_+")
    alts = ([("".join(camel))] if camel else []) + [snake]
    return _INV_PREFIX + "|".join(alts) + ")"


def testdox_from_regex(alt: str) -> tuple[str, str] | None:
    """(testdox method name, rest of the alternative) if `alt` starts with testdox_method_regex(T)."""
    if not alt.startswith(_INV_PREFIX):
        return None
    depth, end = 0, -1
    for i in range(len("(?:test_|test)?"), len(alt)):
        if alt[i] == "(":
            depth += 1
        elif alt[i] == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end < 0:
        return None
    inv, rest = alt[: end + 1], alt[end + 1 :]
    snake = inv[:-1].rsplit("|", 1)[-1]
    m = re.fullmatch(r"\[([A-Z])[a-z]\](.*?)_[*+]", snake)
    if not m:
        return None
    t = m.group(1) + m.group(2).replace("_", " ")
    return (t, rest) if testdox_method_regex(t) == inv else None


# ---- filter grammar -------------------------------------------------------------------------------


def parse_filter(value: str) -> list[tuple[str, bool, list[tuple[str, str | None]]]] | None:
    """[(class, class_is_fully_qualified, [(method, data-set suffix | None = all)])] for a node-level
    filter, else None. Forms: `/^NS\\ClassTest::M$/`, `/(?:^|\\)ClassTest::M$/` and, for several
    classes, `/^(?:NS\\A::M|NS\\B::M)$/` (fully qualified only), where M is a method alternative
    or `(?:...|...)`."""
    if len(value) < 3 or not value.startswith("/") or not value.endswith("/"):
        return None
    body = value[1:-1]
    if body.startswith("^(?:") and body.endswith(")$") and _ml._balanced_group(body[1:-1]):
        groups = []
        for part in _split_top(body[4:-2]):
            one = _class_methods(part)
            if one is None:
                return None
            groups.append((one[0], True, one[1]))
        return groups or None
    if body.startswith("^"):
        body, fq = body[1:], True
    elif body.startswith("(?:^|\\\\)"):
        body, fq = body[len("(?:^|\\\\)") :], False
    else:
        return None
    if not body.endswith("$") or body.endswith("\\$"):
        return None
    one = _class_methods(body[:-1])
    return [(one[0], fq, one[1])] if one else None


def _class_methods(body: str) -> tuple[str, list[tuple[str, str | None]]] | None:
    sep = body.find("::")
    if sep <= 0:
        return None
    cls = _ml._literal(body[:sep], "/")
    if cls is None:
        return None
    rest = body[sep + 2 :]
    if (
        rest.startswith("(?:")
        and rest.endswith(")")
        and _ml._balanced_group(rest)
        and not rest.startswith(_INV_PREFIX)
    ):
        alts = _split_top(rest[3:-1])
    else:
        alts = [rest]
    methods: list[tuple[str, str | None]] = []
    for alt in alts:
        dox = testdox_from_regex(alt)
        if dox is not None:
            name, tail = dox
            if tail == DS_ANY:
                methods.append((_TESTDOX_MARK + name, None))
                continue
            lit = _ml._literal(tail, "/") if tail else ""
            if lit is None or (lit and not _DS.match("x" + lit)):
                return None
            methods.append((_TESTDOX_MARK + name, lit))
            continue
        whole = alt.endswith(DS_ANY)
        if whole:
            alt = alt[: -len(DS_ANY)]
        lit = _ml._literal(alt, "/")
        if not lit:
            return None
        if whole:
            methods.append((lit, None))
            continue
        m = _DS.match(lit)
        methods.append((m.group("m"), m.group("ds")) if m else (lit, ""))
    return cls, methods


def _split_top(body: str) -> list[str]:
    parts, cur, depth, i = [], [], 0, 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur.append(body[i : i + 2])
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "|" and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _methods_regex(alts: list[str]) -> str:
    if len(alts) == 1 and not alts[0].endswith(DS_ANY) and not alts[0].startswith(_INV_PREFIX):
        return alts[0]
    return "(?:" + "|".join(alts) + ")"


def _namespace_of(cls: str, task: Task | None) -> str | None:
    """The `namespace X;` line of the class's file, if the test patch shows it."""
    for path, _added, post in _ml.test_patch_files(task):
        if posixpath.basename(path) == f"{cls}.php":
            for line in post:
                m = re.match(r"^\s*namespace\s+([\w\\]+)\s*;", line)
                if m:
                    return m.group(1)
    return None


class PhpUnitRunner(Runner):
    name = "phpunit"
    language = "php"
    log_parser = "parse_log_phpunit"

    def serves(self, task: Task) -> bool:
        return task.log_parser == "parse_log_phpunit"

    def recognizes(self, cmd: ParsedCommand) -> bool:
        return _phpunit_args(cmd) is not None

    def selection(self, cmd: ParsedCommand) -> Selection:
        w = _ml.walk_options(_phpunit_args(cmd) or [], _OPTS, runner="phpunit", stop_at_dd=False)
        sel = Selection(problems=list(w.problems))
        for name, value in w.options:
            if name.startswith("--colors") or name == "--testdox":
                continue
        files = w.positionals
        for s in _ml.values(w, "--testsuite"):
            sel.selectors.append(Selector(s, "suite", note="--testsuite runs a configured suite"))
        filters = _ml.values(w, "--filter")
        if len(filters) > 1:
            sel.problems.append(
                _ml.problem(
                    "runner.arguments", "phpunit: --filter given more than once; only the last applies"
                )
            )
        if not filters:
            for f in files:
                sel.selectors.append(
                    Selector(
                        f,
                        "file" if f.endswith(".php") else "directory",
                        note="a test file or directory runs all of its tests",
                    )
                )
            if not files and not _ml.values(w, "--testsuite"):
                sel.selectors.append(
                    Selector(cmd.render(), "suite", note="no filter and no file: every test")
                )
            return sel
        parsed = parse_filter(filters[-1])
        if parsed is None or any(not fq for _c, fq, _m in parsed) and len(files) != 1:
            note = (
                "--filter is a regex searched in `Class::method`; use /^Namespace\\\\ClassTest::(?:testA|testB)$/ "
                "or /(?:^|\\\\)ClassTest::testA$/ with one test file"
            )
            sel.selectors.append(Selector(filters[-1], "pattern", note=note))
            return sel
        path = files[0] if len(files) == 1 else None
        for cls, meth, ds in [(c, m, d) for c, _fq, ms in parsed for m, d in ms]:
            scope: tuple[str, ...] = (cls,)
            if meth.startswith(_TESTDOX_MARK):
                meth, scope = meth[len(_TESTDOX_MARK) :], (cls, _TESTDOX_MARK)
            text = f"{cls}::{meth}{ds or ''}"
            sel.selectors.append(
                Selector(text, "node", Node(self.name, meth, path=path, scope=scope, param=ds, text=text))
            )
        return sel

    def parse_node(self, text: str) -> Node:
        t = text.strip()
        if "::" in t and " > " not in t:
            cls, _, rest = t.partition("::")
            m = _DS.match(rest)
            meth, ds = (m.group("m"), m.group("ds")) if m else (rest, None)
            return Node(self.name, meth, scope=(cls,), param=ds, text=t)
        cls, meth, ds = split_testdox(t)
        return Node(self.name, meth, scope=(cls,), param=ds, text=t)

    @staticmethod
    def _is_testdox(node: Node) -> bool:
        return " > " in node.text

    def binds(self, selected: Node, declared: Node) -> bool:
        if selected.scope:
            sel_cls = selected.scope[0]
        elif selected.path and selected.path.endswith(".php"):
            sel_cls = posixpath.basename(selected.path)[:-4]
        else:
            sel_cls = ""
        sel_dox = selected.scope[1:] == (_TESTDOX_MARK,) or (
            not selected.scope and self._is_testdox(selected)
        )
        sel_names = {selected.name} if sel_dox else _method_testdox_variants(selected.name)
        dcls = declared.scope[0] if declared.scope else ""
        if self._is_testdox(declared):
            if dcls and prettify_class(sel_cls) != dcls:
                return False
            if declared.name not in sel_names:
                return False
        else:
            if dcls and not (
                sel_cls == dcls or sel_cls.endswith("\\" + dcls) or dcls.endswith("\\" + sel_cls)
            ):
                return False
            if (
                (prettify_method(declared.name) not in sel_names)
                if sel_dox
                else declared.name != selected.name
            ):
                return False
        if selected.param is None:  # the method with all its data sets
            return True
        return (declared.param or "") == (selected.param or "")

    def node_for_file(self, path: str, scope: Sequence[str], name: str) -> Node:
        """A test method the patch adds, as its testdox name (SWE-bench's PHPUnit naming)."""
        cls = posixpath.basename(path)[:-4] if path.endswith(".php") else (scope[-1] if scope else "")
        dox = prettify_method(name)
        return Node(self.name, dox, path=path, text=f"{prettify_class(cls)} > {dox}")

    def build_command(self, nodes: Sequence[Node], *, task: Task | None = None) -> str:
        """`vendor/bin/phpunit --testdox --colors=never <test file> --filter '/(?:^|\\\\)ClassTest::(?:...)$/'`."""
        program, files = "vendor/bin/phpunit", []
        for off in _ml.official_commands(task):
            args = _phpunit_args(off)
            if args is None:
                continue
            program = " ".join(off.argv[: len(off.argv) - len(args)])
            files = [a for a in _ml.walk_options(args, _OPTS, runner="phpunit", stop_at_dd=False).positionals]
            break
        by_class: dict[str, list[str]] = {}
        for n in nodes:
            if self._is_testdox(n):
                cls = self._class_for(n, task, files)
                head = testdox_method_regex(n.name)
                if head is None:
                    raise InputError(
                        f"phpunit: the testdox name {n.text!r} cannot be mapped back to method names",
                        instance=task.instance_id if task else None,
                        field="FAIL_TO_PASS",
                    )
            else:
                cls, head = (n.scope[0] if n.scope else ""), _ml.regex_escape(n.name, "/")
            alt = head + (_ml.regex_escape(n.param, "/") if n.param else DS_ANY)
            by_class.setdefault(cls.rsplit("\\", 1)[-1], [])
            if alt not in by_class[cls.rsplit("\\", 1)[-1]]:
                by_class[cls.rsplit("\\", 1)[-1]].append(alt)
        if len(by_class) == 1 and len(files) <= 1:
            cls, alts = next(iter(by_class.items()))
            flt = "/(?:^|\\\\)" + _ml.regex_escape(cls, "/") + "::" + _methods_regex(alts) + "$/"
            parts = program.split(" ") + ["--testdox", "--colors=never"] + files + ["--filter", flt]
            return " ".join(_ml.q(p) for p in parts)
        # several classes: one run without a file argument, restricted by fully qualified names
        groups = []
        for cls, alts in by_class.items():
            ns = _namespace_of(cls, task)
            if ns is None:
                raise InputError(
                    f"phpunit: the nodes span several test classes and the test patch does not show "
                    f"the namespace of {cls}; --filter can only pin several classes by their fully "
                    "qualified names",
                    instance=task.instance_id if task else None,
                    field="FAIL_TO_PASS",
                )
            groups.append(_ml.regex_escape(f"{ns}\\{cls}", "/") + "::" + _methods_regex(alts))
        flt = "/^(?:" + "|".join(groups) + ")$/"
        parts = program.split(" ") + ["--testdox", "--colors=never", "--filter", flt]
        return " ".join(_ml.q(p) for p in parts)

    def _class_for(self, node: Node, task: Task | None, files: list[str]) -> str:
        """The test class behind a testdox class name: the official command's test file (PHPUnit runs
        the class named like the file), checked against the testdox name."""
        want = node.scope[0] if node.scope else split_testdox(node.text)[0]
        candidates = [posixpath.basename(f)[:-4] for f in files if f.endswith(".php")]
        candidates += [
            posixpath.basename(p)[:-4]
            for p, _a, _post in _ml.test_patch_files(task)
            if p.endswith("Test.php")
        ]
        for cls in _ml.unique(candidates):
            if prettify_class(cls) == want:
                return cls
        raise InputError(
            f"phpunit: no test file of the row names the class {want!r} (testdox {node.text!r})",
            instance=task.instance_id if task else None,
            field="FAIL_TO_PASS",
        )

    def observed_command(self, cmd: ParsedCommand) -> ParsedCommand:
        argv = list(cmd.argv)
        if "--testdox" not in argv:
            argv.append("--testdox")
        if not any(a.startswith("--colors") for a in argv):
            argv.append("--colors=never")
        return cmd.with_argv(argv)

    def result_for(self, node: Node, results: dict[str, str]) -> str | None:
        if self._is_testdox(node):
            return results.get(node.text)
        cls = prettify_class(node.scope[0]) if node.scope else ""
        hits = []
        for variant in _method_testdox_variants(node.name):
            if node.param is None:
                hits += [
                    v
                    for k, v in results.items()
                    if k == f"{cls} > {variant}" or k.startswith(f"{cls} > {variant} with data set ")
                ]
            else:
                key = f"{cls} > {variant}{node.param}"
                if key in results:
                    hits.append(results[key])
        if not hits:
            return None
        return "FAILED" if "FAILED" in hits else ("PASSED" if "PASSED" in hits else hits[0])
