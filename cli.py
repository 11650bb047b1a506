"""`python cli.py ...` from a checkout: the same command line as the installed `perception-gap`.

The command line itself is `perception_gap.cli` (installed with the package); this file only runs it.
"""

import sys

from perception_gap.cli import main

if __name__ == "__main__":
    sys.exit(main())
