"""Session fixtures for the demo tasks (tests/demo_tasks.py): real projects with a re-introduced bug."""

from __future__ import annotations

import dataclasses

import pytest

from tests import demo_tasks
from tests.demo_tasks import BOLTONS, TOOLZ, build_demo


@pytest.fixture(scope="session")
def demo_toolz(tmp_path_factory):
    return build_demo(TOOLZ, tmp_path_factory.mktemp("demo-toolz"))


@pytest.fixture(scope="session")
def demo_boltons(tmp_path_factory):
    return build_demo(BOLTONS, tmp_path_factory.mktemp("demo-boltons"))


@pytest.fixture(scope="session")
def demo_toolz_py313(demo_toolz):
    """The toolz demo task run by CPython 3.13 (frames' locals are write-through proxies from 3.13, PEP 667):
    the same Base checkout and task, a venv of that interpreter."""
    return dataclasses.replace(demo_toolz, venv=demo_tasks.pytest_venv("3.13"))
