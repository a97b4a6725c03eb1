"""``python -m ragplan.cli`` runs the ``ragplan`` command."""

import sys

from ragplan.cli import main

sys.exit(main())
