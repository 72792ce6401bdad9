"""Admin clients and consumers that send a request again while the cluster answers "not yet".

`kafka.clients` builds every admin client and consumer of the product as one of these, so every
admin, metadata, offsets and group call a command or a flow makes rides through a broker
restart, a leader election or a coordinator loading its log, in one place: an answer that
`retry_rule.is_retriable` calls retriable is asked again, after a growing wait, for as long as
the time the caller gave the call allows (its `request_timeout`, `operation_timeout` or
`timeout`; `DEFAULT_BUDGET_S` when it gave none). What was waited for is recorded in
`waits.WAITS`, which the command says once when it ends.

An admin request names many items (partitions, topics, groups) and answers each with its own
future; only the items that failed retriably are asked again, together, and the caller's
futures complete when each item has its final answer, so a caller can still have several
requests in flight at once. A consumer's calls block, and are simply called again; one whose
answer holds a retriable error for some partition (a committed offset whose coordinator is
loading, an offset by time whose leader moved) is called again whole.

Invariants: a caller's future completes exactly once, with the first non-retriable answer or
the last retriable one when time ran out; an answer that is not an error is never asked again;
a final error carries a note naming the cluster and the call (the command line's one line reads it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from dr_stream.kafka.released_clients import ReleasedOnOwnThread
from dr_stream.kafka.retry_rule import error_name, is_retriable, kafka_error, wait_before, worth_another
from dr_stream.kafka.waits import WAITS, Waits

DEFAULT_BUDGET_S = 15.0

T = TypeVar("T")
Item = TypeVar("Item")
Issue = Callable[[list[Any], float], Mapping[Any, Future[Any]]]

_log = logging.getLogger(__name__)


def _budget(kwargs: Mapping[str, Any], *names: str) -> float:
    for name in names:
        value = kwargs.get(name)
        if value is not None and value >= 0:
            return float(value)
    return DEFAULT_BUDGET_S


def _deadline(budget_s: float) -> float:
    """When the last attempt must have been sent: a moment before the caller stops waiting, so it
    reads the cluster's own answer rather than its own timeout (librdkafka ends a request up to
    a second after its timeout)."""
    return time.monotonic() + budget_s - min(1.0, budget_s / 4)


def note_where(exc: BaseException, cluster: str, call: str) -> BaseException:
    """Names the cluster and the call on an error that leaves this module (once)."""
    note = f"cluster {cluster}, {call}"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
    return exc


class _Retried:
    """One admin request over many items, asked again for the items that failed retriably."""

    def __init__(self, issue: Issue, items: Sequence[Any], key: Callable[[Any], Hashable], budget_s: float,
                 cluster: str, call: str, waits: Waits) -> None:
        self._issue, self._key, self.cluster, self.call, self.waits = issue, key, cluster, call, waits
        self._deadline = _deadline(budget_s)
        self._budget_s = budget_s
        self._lock = threading.Lock()
        self._attempt = 0
        self._pending = 0
        self._again: list[Any] = []
        self.futures: dict[Hashable, Future[Any]] = {key(item): Future() for item in items}
        self._round(list(items), budget_s, first=True)

    def _round(self, items: list[Any], seconds: float, first: bool = False) -> None:
        try:
            inner = dict(self._issue(items, seconds))
        except Exception as exc:  # the client refused the request itself (a closed client, bad input)
            if first:
                raise
            for item in items:
                self._settle(self._key(item), exc)
            return
        by_key = {self._key(item): item for item in items}
        with self._lock:
            self._pending = len(inner)
            self._again = []
        for key, future in inner.items():
            future.add_done_callback(partial(self._answered, key, by_key.get(key, key)))

    def _answered(self, key: Hashable, item: Any, future: Future[Any]) -> None:
        error = future.exception()
        if error is None:
            self._settle(key, None, future.result())
        elif is_retriable(error) and worth_another(self._attempt + 1, self._deadline - time.monotonic()):
            self.waits.retried(self.cluster, self.call, error_name(error))
            with self._lock:
                self._again.append(item)
        else:
            if is_retriable(error) and self._attempt:
                self.waits.gave_up(self.cluster)
            self._settle(key, error)
        with self._lock:
            self._pending -= 1
            again = self._again if self._pending == 0 else []
            if again:
                self._attempt += 1
                self._again = []
        if again:
            wait = wait_before(self._attempt)
            seconds = max(1.0, self._deadline - time.monotonic() - wait)
            timer = threading.Timer(wait, self._round, [again, seconds])
            timer.daemon = True
            timer.start()

    def _settle(self, key: Hashable, error: BaseException | None, result: Any = None) -> None:
        outer = self.futures.get(key)
        if outer is None or outer.done():
            return
        if error is None:
            outer.set_result(result)
        else:
            outer.set_exception(note_where(error, self.cluster, self.call))


def retried_call(call: Callable[[float], T], budget_s: float, cluster: str, name: str,
                 waits: Waits = WAITS, answer_errors: Callable[[T], Iterable[BaseException]] = lambda _: ()) -> T:
    """call(seconds left), again while it raises a retriable error, or while its answer holds one
    (`answer_errors`), and time is left."""
    deadline = _deadline(budget_s)
    attempt = 0
    while True:
        try:
            answer = call(max(1.0, deadline - time.monotonic()) if attempt else budget_s)
            error: BaseException | None = next((e for e in answer_errors(answer) if is_retriable(e)), None)
            if error is None:
                return answer
        except KafkaException as exc:
            if not is_retriable(exc):
                raise note_where(exc, cluster, name) from None
            error = exc
        attempt += 1
        if not worth_another(attempt, deadline - time.monotonic()):
            if attempt > 1:
                waits.gave_up(cluster)
            if isinstance(error, KafkaException):
                raise note_where(error, cluster, name) from None
            return answer
        waits.retried(cluster, name, error_name(error))
        _log.debug("%s: %s answered %s; asking again", cluster, name, error_name(error))
        time.sleep(wait_before(attempt))


def _partition_errors(found: Any) -> list[BaseException]:
    if not isinstance(found, list):
        return []
    return [KafkaException(tp.error) for tp in found if isinstance(tp, TopicPartition) and kafka_error(tp.error)]


class RetryingAdmin(ReleasedOnOwnThread, AdminClient):
    """An admin client whose calls ride through a cluster settling (this module's docstring).
    A request in flight keeps it alive: it is released on a thread of dr-stream's
    (`released_clients`), never on the background thread that answers the request."""

    def __init__(self, conf: dict[str, Any], cluster: str, waits: Waits = WAITS) -> None:
        super().__init__(conf)
        self.cluster, self.waits = cluster, waits

    def _each(self, call: str, method: Callable[..., Mapping[Any, Future[Any]]], items: Sequence[Any],
              key: Callable[[Any], Hashable], shape: Callable[[list[Any]], Any], kwargs: dict[str, Any],
              budget_keys: tuple[str, ...] = ("request_timeout",)) -> dict[Hashable, Future[Any]]:
        def issue(subset: list[Any], seconds: float) -> Mapping[Any, Future[Any]]:
            again = {**kwargs, **{k: seconds for k in budget_keys if k in kwargs}}
            return method(shape(subset), **again)

        return _Retried(issue, items, key, _budget(kwargs, *budget_keys), self.cluster, call, self.waits).futures

    def _single(self, call: str, method: Callable[..., Future[Any]], kwargs: dict[str, Any]) -> Future[Any]:
        def issue(_: list[Any], seconds: float) -> Mapping[Hashable, Future[Any]]:
            return {None: method(**({**kwargs, "request_timeout": seconds} if "request_timeout" in kwargs else kwargs))}

        return _Retried(issue, [None], lambda item: item, _budget(kwargs, "request_timeout"), self.cluster, call,
                        self.waits).futures[None]

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        topic = args[0] if args else kwargs.pop("topic", None)
        budget = _budget(kwargs, "timeout")
        return retried_call(lambda left: super(RetryingAdmin, self).list_topics(topic, timeout=left), budget,
                            self.cluster, "metadata", self.waits)

    def describe_topics(self, topics: Any, **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        from confluent_kafka import TopicCollection

        names = list(topics.topic_names)
        return self._each("describe topics", super().describe_topics, names, lambda n: n, TopicCollection, kwargs)

    def list_offsets(self, topic_partition_offsets: dict[Any, Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("list offsets", super().list_offsets, list(topic_partition_offsets.items()),
                          lambda pair: pair[0], dict, kwargs)

    def describe_configs(self, resources: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("describe configs", super().describe_configs, resources, lambda r: r, list, kwargs)

    def incremental_alter_configs(self, resources: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("alter configs", super().incremental_alter_configs, resources, lambda r: r, list, kwargs)

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("create topics", super().create_topics, new_topics, lambda t: t.topic, list, kwargs,
                          ("request_timeout", "operation_timeout"))

    def delete_topics(self, topics: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("delete topics", super().delete_topics, topics, lambda t: t, list, kwargs,
                          ("request_timeout", "operation_timeout"))

    def describe_consumer_groups(self, group_ids: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("describe groups", super().describe_consumer_groups, group_ids, lambda g: g, list, kwargs)

    def delete_consumer_groups(self, group_ids: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("delete groups", super().delete_consumer_groups, group_ids, lambda g: g, list, kwargs)

    def create_acls(self, acls: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("create ACLs", super().create_acls, acls, lambda a: a, list, kwargs)

    def delete_acls(self, acl_binding_filters: list[Any], **kwargs: Any) -> dict[Hashable, Future[Any]]:  # type: ignore[override]
        return self._each("delete ACLs", super().delete_acls, acl_binding_filters, lambda a: a, list, kwargs)

    def list_consumer_groups(self, **kwargs: Any) -> Future[Any]:  # type: ignore[override]
        return self._single("list groups", super().list_consumer_groups, kwargs)

    def describe_acls(self, acl_binding_filter: Any, **kwargs: Any) -> Future[Any]:  # type: ignore[override]
        return self._single("describe ACLs", lambda **kw: super(RetryingAdmin, self).describe_acls(
            acl_binding_filter, **kw), kwargs)

    def describe_cluster(self, **kwargs: Any) -> Future[Any]:  # type: ignore[override]
        return self._single("describe cluster", super().describe_cluster, kwargs)


class RetryingConsumer(Consumer):
    """A consumer whose look-ups (metadata, log ends, offsets by time, committed offsets) ride
    through a cluster settling; reading records is librdkafka's own business and unchanged."""

    def __init__(self, conf: dict[str, Any], cluster: str, waits: Waits = WAITS) -> None:
        super().__init__(conf)
        self.cluster, self.waits = cluster, waits
        # a commit names no timeout: librdkafka's own bounds each attempt (socket.timeout.ms)
        self.commit_budget_s = DEFAULT_BUDGET_S

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return retried_call(lambda left: super(RetryingConsumer, self).list_topics(topic, timeout=left),
                            _budget({"timeout": timeout}, "timeout"), self.cluster, "metadata", self.waits)

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float | None = None,
                              cached: bool = False) -> Any:
        return retried_call(
            lambda left: super(RetryingConsumer, self).get_watermark_offsets(partition, timeout=left, cached=cached),
            _budget({"timeout": timeout}, "timeout"), self.cluster, "log ends", self.waits)

    def offsets_for_times(self, partitions: list[Any], timeout: float | None = None) -> Any:
        return retried_call(lambda left: super(RetryingConsumer, self).offsets_for_times(partitions, timeout=left),
                            _budget({"timeout": timeout}, "timeout"), self.cluster, "offsets by time", self.waits,
                            _partition_errors)

    def committed(self, partitions: list[Any], timeout: float | None = None) -> Any:
        return retried_call(lambda left: super(RetryingConsumer, self).committed(partitions, timeout=left),
                            _budget({"timeout": timeout}, "timeout"), self.cluster, "committed offsets", self.waits,
                            _partition_errors)

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        """A synchronous commit of named offsets is asked again like a look-up (committing the same
        offsets twice changes nothing); any other commit is librdkafka's as it is."""
        if args or kwargs.get("asynchronous", True) or kwargs.get("offsets") is None:
            return super().commit(*args, **kwargs)
        return retried_call(lambda _: super(RetryingConsumer, self).commit(**kwargs), self.commit_budget_s,
                            self.cluster, "commit offsets", self.waits, _partition_errors)
