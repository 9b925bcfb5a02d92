"""``python -m exo_rt`` runs the ``exo-rt`` command."""

import sys

from exo_rt.cli import main

if __name__ == "__main__":
    sys.exit(main())
