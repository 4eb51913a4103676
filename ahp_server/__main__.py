"""``python -m ahp_server …``: the same entry point as the ``ahp-server`` command.

Layer: cli (the outermost).
"""

from ahp_server.cli import main

raise SystemExit(main())
