"""`python -m grpokit.cli ...` runs the `grpokit` command."""

import sys

from .main import main

sys.exit(main())
