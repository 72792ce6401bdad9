"""A DataFrame step: `DataFrame -> DataFrame`, composed with `df.transform`.

The record path, the offset index and translation are chains of such steps, so each link can
be tested alone on a small DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame

Step = Callable[[DataFrame], DataFrame]
