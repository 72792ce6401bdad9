"""The dev Kubernetes for one test module, and an HDFS for the flows in its pods: each started in
a directory of its own, stopped after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dr_stream.dev.hadoop import LocalHadoop
from dr_stream.dev.kube import LocalKube


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKube]:
    cluster = LocalKube(tmp_path_factory.mktemp("kube") / "k8s")
    try:
        cluster.up(say=print, timeout=600)
        yield cluster
    finally:
        cluster.down(say=print)


@pytest.fixture(scope="module")
def hadoop(cluster_home, request: pytest.FixtureRequest) -> Iterator[LocalHadoop]:
    cluster = LocalHadoop(cluster_home / f"hadoop-{request.module.__name__.rsplit('.', 1)[-1]}", 21800)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
