"""Make the training fixtures available to the tests in this directory."""

from tests.training.rl_fixtures import candidate_run, sympy_task  # noqa: F401
from tests.training_fixtures import tiny_model, tiny_model_dir, tiny_repo  # noqa: F401
