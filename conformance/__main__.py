"""``python -m conformance``: the ``conformance`` command."""

import sys

from .cli import main

sys.exit(main())
