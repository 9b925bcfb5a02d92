"""``python -m exo_rt.web``: the web console's process (:mod:`exo_rt.web.server`)."""

import sys

from exo_rt.web.server import main

sys.exit(main())
