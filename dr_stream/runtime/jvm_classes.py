"""Java classes of the driver's JVM, named in full instead of walked to.

py4j resolves `jvm.a.b.C` one dotted step at a time, and every package step is a class lookup
that misses: the JVM's class loader looks for it in each of the ~300 jars on Spark's class
path. A driver loop that reached a class that way every second (whether the JVM is stopping)
spent the JVM a steady share of CPU on it: a class named in full costs no lookup at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from py4j.java_gateway import JavaClass

if TYPE_CHECKING:
    from pyspark import SparkContext


def jvm_class(context: SparkContext, name: str) -> JavaClass:
    """The class `name` (fully qualified) of `context`'s JVM, for its static members and
    constructors; an unknown name fails at the first call, as py4j's own lookup would."""
    return JavaClass(name, context._gateway._gateway_client)
