"""A JVM of the bench's own, holding dr-stream's jar, for batched group offsets.

Thousands of groups committing through one librdkafka consumer each would measure the bench,
not the replicator; the bench drives them through the same `GroupOffsets` class the flow's
control loops use (one request per coordinator), in a JVM it starts over Py4J and stops by PID.
"""

from __future__ import annotations

from pathlib import Path

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka.group_offsets.java_admin import GroupOffsets
from dr_stream.runtime.jvm import connection_check_classpath


class BenchJvm:
    def __init__(self, log_file: Path) -> None:
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

        self._log = open(log_file, "ab")
        port, self.proc = launch_gateway(classpath=connection_check_classpath(), die_on_exit=True,
                                         javaopts=["-Xmx512m"], redirect_stdout=self._log,
                                         redirect_stderr=self._log, return_proc=True)
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))

    def group_offsets(self, cluster: ClusterConfig) -> GroupOffsets:
        properties = {"bootstrap.servers": cluster.bootstrap_servers, **cluster.kafka}
        return GroupOffsets(cluster, self.gateway.jvm.io.drstream.kafka.GroupOffsets(properties, 30000), 30.0)

    def cpu_seconds(self) -> float:
        """The JVM's user + system CPU time so far."""
        import os

        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        try:
            self.gateway.shutdown()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self._log.close()
