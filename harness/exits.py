"""What a verb's end means to the shell, and the one error type for bad input that is not a
spec's: the CLI, the sweeps' policies and tune share them, and import nothing else of the
harness through this module (no circle).

Exit status: 0 all well; 1 some points failed or did not finish (the others completed), or the
sweep is held by another run; 2 bad input (spec, arguments, overrides), with one line on stderr
and nothing run; 3 every point ran but an expectation of the spec's `expect:` failed (run,
submit --wait, report); 130 interrupted (Ctrl-C): what was measured is kept, and `harness
resume SWEEP` goes on.
"""

from __future__ import annotations

from harness_schema.expect import EXIT_EXPECTATION_FAILED

EXIT_OK, EXIT_FAILED_POINTS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_EXPECTATION_FAILED",
    "EXIT_FAILED_POINTS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "UsageError",
]


class UsageError(Exception):
    """Bad input that is not a spec error (a missing folder, an empty plan, a backend's
    refusal): one line on stderr, exit 2, nothing run."""
