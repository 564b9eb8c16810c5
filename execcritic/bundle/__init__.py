"""Test bundles: b = (test.patch, test_command, test_contract.json) and their validation."""
