"""`python -m steward.sim ...`"""

from steward.sim.cli import main

raise SystemExit(main())
