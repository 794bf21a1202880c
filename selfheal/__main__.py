"""``python -m selfheal``: the same as the `selfheal` command."""

import sys

from selfheal.cli import main

sys.exit(main())
