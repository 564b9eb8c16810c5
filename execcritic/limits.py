"""Sizes past which an input is refused before any work starts, with one line naming it: a 50 MB patch to
`official` used to cost two minutes and a gigabyte before an honest "unresolved". Each limit is far above what
SWE-bench needs (measured on the Verified, Lite, Multilingual and full dev rows: the largest gold patch is 206 KB,
the largest test patch 43 KB, the largest row 296 KB), so no real task meets one. README ("Limits on input size")
lists them; `errors.check_size` refuses what is over one."""

from __future__ import annotations

MAX_PATCH_BYTES = 4 * 1024 * 1024          # a source or test patch (official --patch, a bundle's test.patch)
MAX_BUNDLE_BYTES = 8 * 1024 * 1024         # a bundle's files together (test.patch, test_command, contract)
MAX_ROW_BYTES = 8 * 1024 * 1024            # one dataset row (its JSON text)
