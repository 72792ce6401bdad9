"""The driver's JVM as Python sees it: the running context, its JVM view, classes named in full.

py4j resolves `jvm.a.b.C` one dotted step at a time, and every package step is a class lookup
that misses: the JVM's class loader looks for it in each of the ~300 jars on Spark's class
path. A driver loop that reached a class that way every second (whether the JVM is stopping)
spent the JVM a steady share of CPU on it: a class named in full costs no lookup at all.

pyspark types the context and its JVM as optional (there may be none yet); every caller here
runs inside a flow whose session has started, so `active_context` says so once, clearly, instead
of each caller failing on `None`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from py4j.java_gateway import JavaClass, JavaGateway

if TYPE_CHECKING:  # importing pyspark costs a command that never starts Spark a second
    from pyspark import SparkContext


def active_context() -> SparkContext:
    """The running SparkContext; a clear error when there is none (no session started yet)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        raise RuntimeError("no SparkContext is running: the flow's Spark session must start first")
    return context


def jvm_view(context: SparkContext | None = None) -> Any:
    """The py4j view of `context`'s JVM (the running context's by default); dynamic, as py4j's is."""
    view = (context or active_context())._jvm
    if view is None:
        raise RuntimeError("the SparkContext has no JVM: it was stopped")
    return view


def gateway(context: SparkContext | None = None) -> JavaGateway:
    """The py4j gateway of `context` (the running context's by default), for arrays and callbacks."""
    found = (context or active_context())._gateway
    if found is None:
        raise RuntimeError("the SparkContext has no py4j gateway: it was stopped")
    return found


def jvm_class(context: SparkContext | None, name: str) -> JavaClass:
    """The class `name` (fully qualified) of `context`'s JVM (the running context's by default),
    for its static members and constructors; an unknown name fails at the first call, as py4j's
    own lookup would."""
    return JavaClass(name, gateway(context)._gateway_client)


def java_map(entries: Mapping[str, str], context: SparkContext | None = None) -> Any:
    """`entries` as a `java.util.HashMap` of `context`'s JVM (the running context's by default):
    what a Java constructor or method taking client settings is given."""
    java = jvm_view(context).java.util.HashMap()
    for key, value in entries.items():
        java.put(key, value)
    return java
