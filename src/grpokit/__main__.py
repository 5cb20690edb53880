"""`python -m grpokit ...` and `torchrun --nproc-per-node N -m grpokit train ...` run the `grpokit` command."""

import sys

from .cli import main

sys.exit(main())
