"""Session fixtures for the demo tasks (tests/demo_tasks.py): real projects with a re-introduced bug."""

from __future__ import annotations

import pytest

from tests.demo_tasks import BOLTONS, TOOLZ, build_demo


@pytest.fixture(scope="session")
def demo_toolz(tmp_path_factory):
    return build_demo(TOOLZ, tmp_path_factory.mktemp("demo-toolz"))


@pytest.fixture(scope="session")
def demo_boltons(tmp_path_factory):
    return build_demo(BOLTONS, tmp_path_factory.mktemp("demo-boltons"))
