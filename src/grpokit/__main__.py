"""`python -m grpokit ...` and `torchrun --nproc-per-node N -m grpokit train ...` run the `grpokit` command."""

import sys

from .cli.main import main

sys.exit(main())
