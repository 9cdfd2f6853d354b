"""``python -m ember module:app``: see ``ember.cli``."""

import sys

from .cli import main

sys.exit(main())
