"""``python -m hbfsim.studies NAME ...``: the ``study`` sub-command without the hbfsim command."""

import sys

from hbfsim.studies.cli import main

sys.exit(main())
