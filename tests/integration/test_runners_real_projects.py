"""The multilingual runners against real toolchains: tiny cargo, go and Maven projects built in a tmp dir, the
bundle's exact-selection command run for real, and its output read back by the runner (slow; skipped with the
reason where a toolchain is missing)."""

from __future__ import annotations

import os

import pytest

from tests.allowed_skips import allowed

from execcritic.bundle.command import parse_command
from execcritic.runners.registry import get_runner

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run(cmd_text: str, runner, cwd, env_extra: dict[str, str] | None = None):
    import shutil
    import subprocess

    cmd = runner.observed_command(parse_command(cmd_text))
    assert not cmd.problems
    env = dict(os.environ, **(env_extra or {}))
    env.update(dict(cmd.env))
    assert shutil.which(cmd.argv[0]) or cmd.argv[0].startswith("./")
    proc = subprocess.run(
        list(cmd.argv), check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow
def test_cargo_exact_selection_real_project(tmp_path):
    import shutil

    if not shutil.which("cargo"):
        pytest.skip("cargo not installed")
    (tmp_path / "src").mkdir()
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n')
    (tmp_path / "src" / "lib.rs").write_text(
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[cfg(test)]\nmod tests {\n    use super::*;\n"
        "    #[test]\n    fn adds() { assert_eq!(add(1, 2), 3); }\n"
        "    #[test]\n    fn adds_twice() { assert_eq!(add(2, 2), 4); }\n"
        "    #[test]\n    fn breaks() { assert_eq!(add(1, 1), 3); }\n}\n"
    )
    cargo = get_runner("cargo")
    nodes = [cargo.parse_node("tests::adds"), cargo.parse_node("tests::breaks")]
    rc, log = _run(
        cargo.build_command(nodes),
        cargo,
        tmp_path,
        {"CARGO_NET_OFFLINE": "true", "CARGO_TARGET_DIR": str(tmp_path / "target")},
    )
    res = cargo.parse_results(log)
    assert rc != 0
    assert [cargo.result_for(n, res) for n in nodes] == ["PASSED", "FAILED"]
    assert "tests::adds_twice" not in res  # --exact: the substring sibling did not run


@pytest.mark.slow
def test_go_exact_selection_real_project(tmp_path):
    import shutil

    if not shutil.which("go"):
        pytest.skip("go not installed")
    (tmp_path / "go.mod").write_text("module example.com/demo\n\ngo 1.19\n")
    (tmp_path / "demo.go").write_text("package demo\n\nfunc Add(a, b int) int { return a + b }\n")
    (tmp_path / "demo_test.go").write_text(
        'package demo\n\nimport "testing"\n\n'
        'func TestAdd(t *testing.T) { if Add(1, 2) != 3 { t.Fatal("bad") } }\n'
        'func TestAdd2(t *testing.T) { if Add(2, 2) != 4 { t.Fatal("bad") } }\n'
        "func TestTable(t *testing.T) {\n"
        '\tfor _, c := range []struct{ name string; a, b, want int }{{"one plus one", 1, 1, 2}, '
        '{"two/plus two", 2, 2, 5}} {\n'
        "\t\tc := c\n\t\tt.Run(c.name, func(t *testing.T) { if Add(c.a, c.b) != c.want { t.Error(c.name) } })\n"
        "\t}\n}\n"
    )
    go = get_runner("gotest")
    nodes = [go.parse_node("TestAdd"), go.parse_node("TestTable/two/plus_two")]
    rc, log = _run(
        go.build_command(nodes),
        go,
        tmp_path,
        {"GOCACHE": str(tmp_path / ".cache"), "GOPATH": str(tmp_path / ".gopath"), "GOFLAGS": "-mod=mod"},
    )
    res = go.parse_results(log)
    assert rc != 0
    assert [go.result_for(n, res) for n in nodes] == ["PASSED", "FAILED"]
    assert "TestAdd2" not in res and "TestTable/one_plus_one" not in res  # anchored: nothing else ran


@pytest.mark.slow
def test_maven_exact_selection_real_project(tmp_path):
    import shutil

    repo = os.path.expanduser("~/.m2/repository")
    needed = [
        "org/apache/maven/plugins/maven-surefire-plugin/3.2.5",
        "org/junit/jupiter/junit-jupiter-engine/5.10.2",
        "org/apache/maven/plugins/maven-compiler-plugin/3.13.0",
        "org/apache/maven/plugins/maven-resources-plugin/3.3.1",
    ]
    if not shutil.which("mvn") or not all(os.path.isdir(os.path.join(repo, p)) for p in needed):
        pytest.skip(allowed("maven-central", "mvn or the surefire/compiler/resources plugins and JUnit 5 are "
                                              "not in ~/.m2"))
    pom = (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>com.ex</groupId><artifactId>demo</artifactId><version>1.0</version>"
        "<properties><maven.compiler.source>17</maven.compiler.source>"
        "<maven.compiler.target>17</maven.compiler.target></properties><dependencies><dependency>"
        "<groupId>org.junit.jupiter</groupId><artifactId>junit-jupiter-engine</artifactId>"
        "<version>5.10.2</version><scope>test</scope></dependency></dependencies><build><plugins>"
        "<plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId>"
        "<version>3.2.5</version></plugin><plugin><groupId>org.apache.maven.plugins</groupId>"
        "<artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>"
        "<plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId>"
        "<version>3.3.1</version></plugin></plugins></build></project>"
    )
    (tmp_path / "pom.xml").write_text(pom)
    test_dir = tmp_path / "src" / "test" / "java" / "com" / "ex"
    test_dir.mkdir(parents=True)
    (test_dir / "CalcTest.java").write_text(
        "package com.ex;\nimport static org.junit.jupiter.api.Assertions.*;\nimport org.junit.jupiter.api.Test;\n"
        "public class CalcTest {\n  @Test public void testAdd() { assertEquals(3, 1 + 2); }\n"
        "  @Test public void testAddition() { assertEquals(5, 2 + 3); }\n"
        "  @Test public void testBroken() { assertEquals(4, 1 + 2); }\n}\n"
    )
    mvn = get_runner("maven")
    nodes = [mvn.parse_node("com.ex.CalcTest#testAdd"), mvn.parse_node("com.ex.CalcTest#testBroken")]
    rc, log = _run(mvn.build_command(nodes).replace("mvn test", "mvn -o test", 1), mvn, tmp_path)
    res = mvn.parse_results(log)
    assert rc != 0
    assert [mvn.result_for(n, res) for n in nodes] == ["PASSED", "FAILED"]
    assert "com.ex.CalcTest#testAddition" not in res  # the method prefix sibling did not run
