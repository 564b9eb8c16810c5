"""The official (oracle) bundle of a task and the check that every such bundle validates.

build.py builds it (dataset test_patch + exact command + generated contract), resolve.py resolves the
dataset's test names to exact nodes, check.py validates bundles over a dataset, outlines.py stands in
for Base sources offline.
"""

from execcritic.harness.oracle.build import GENERATED_ENTRYPOINT, OracleBuild, build_oracle, oracle_bundle
from execcritic.harness.oracle.resolve import OracleError, official_test_files

__all__ = ["GENERATED_ENTRYPOINT", "OracleBuild", "OracleError", "build_oracle", "official_test_files", "oracle_bundle"]
