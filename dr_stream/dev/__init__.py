"""Local infrastructure for development, the demo and the tests: `clusters` (single-node KRaft
clusters started from the pinned jars) and `demo` (`make demo`)."""
