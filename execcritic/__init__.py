"""ExecCritic: Learn to Test, Test to Improve - a fail-closed test-then-repair suite for SWE-bench tasks.

Pipeline, as the package folders read: tasks -> bundle -> sandbox -> harness -> agents -> evaluation
-> rewards -> training -> results.
"""

__version__ = "0.1.0"
