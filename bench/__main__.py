"""``python -m bench``: the host-vs-floor suite (``bench/suite.py``)."""

from bench.suite import main

raise SystemExit(main())
