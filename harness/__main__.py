"""python -m harness: the command line (harness/cli.py)."""

import sys

from harness.cli import main

sys.exit(main())
