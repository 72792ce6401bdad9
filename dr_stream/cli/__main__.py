"""`python -m dr_stream.cli`: the `dr-stream` command, as the launchers and the tests run it."""

import sys

from dr_stream.cli import main

sys.exit(main())
