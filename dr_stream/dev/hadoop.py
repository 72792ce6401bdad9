"""A local HDFS and YARN for development, the demo and the tests: `dr-stream dev yarn up`.

One JVM runs Hadoop's own mini-cluster classes (NameNode, DataNode, ResourceManager and one
NodeManager, `io.drstream.dev.HadoopCluster`), from the jars `make setup` fetched. Its client
configuration lands in `<home>/conf` for `HADOOP_CONF_DIR`. Invariants: `start` returns only once
the NodeManager has registered (an application submitted then gets containers), `stop` signals
only the PID it recorded, and HDFS starts empty every time (it is formatted at start).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dr_stream.dev.processes import running_pid, stop_pid
from dr_stream.runtime.jvm import hadoop_classpath
from dr_stream.runtime.paths import cache_dir

# The JDK 17 module openings Hadoop's servers need (the same ones Spark passes to its own JVMs).
_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in
          ("java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
           "java.util.concurrent", "sun.nio.ch", "sun.security.action")]

_LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log}
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d %p %c{{1}}: %m%n
"""


@dataclass(frozen=True)
class LocalHadoop:
    """HDFS with its NameNode on `namenode_port` and YARN with a NodeManager offering
    `memory_mb` and `vcores` (more vcores than this machine's cores: Spark's containers here
    mostly wait on the network). The ResourceManager's ports are chosen at start and written
    to the client configuration."""

    home: Path
    namenode_port: int
    memory_mb: int = 6144
    vcores: int = 8

    @property
    def conf_dir(self) -> Path:
        """The directory to export as HADOOP_CONF_DIR."""
        return self.home / "conf"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "hadoop.log"

    @property
    def _pid_file(self) -> Path:
        return self.home / "hadoop.pid"

    @property
    def _ready_file(self) -> Path:
        return self.conf_dir / "ready"

    def pid(self) -> int | None:
        return running_pid(self._pid_file)

    def is_running(self) -> bool:
        return self.pid() is not None and self._ready_file.exists()

    @property
    def fs_uri(self) -> str:
        """`hdfs://localhost:PORT`, the default file system."""
        return f"hdfs://localhost:{self.namenode_port}"

    @property
    def resourcemanager_web(self) -> str:
        return "http://" + self._ready_file.read_text().split()[2]

    def start(self, timeout: float = 120.0) -> None:
        if self.is_running():
            return
        if self.pid() is not None:  # started, not ready yet: wait for it
            self._wait_ready(timeout)
            return
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        work = self.home / "work"
        shutil.rmtree(work, ignore_errors=True)  # HDFS and YARN start empty
        work.mkdir(parents=True)
        self._ready_file.unlink(missing_ok=True)
        log4j = self.home / "log4j.properties"
        log4j.write_text(_LOG4J.format(log=self.log_file))
        command = ["java", "-Xms256m", "-Xmx768m", *_OPENS, f"-Dlog4j.configuration=file:{log4j}",
                   f"-Dtest.build.data={work}", "-cp", hadoop_classpath(), "io.drstream.dev.HadoopCluster",
                   str(work), str(self.conf_dir), str(self.namenode_port), str(self.memory_mb), str(self.vcores)]
        with open(self.home / "logs" / "hadoop.out", "ab") as out:
            proc = subprocess.Popen(command, cwd=work, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self._pid_file.write_text(f"{proc.pid}\n")
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid() is None:
                raise RuntimeError(f"dev hadoop: exited during start-up; see {self.home / 'logs' / 'hadoop.out'}")
            if self._ready_file.exists():
                return
            time.sleep(0.5)
        raise TimeoutError(f"dev hadoop: not ready after {timeout:.0f}s; see {self.log_file}")

    def stop(self, timeout: float = 60.0) -> bool:
        """Stops the cluster (its NodeManager stops the containers it runs); False when not running."""
        stopped = stop_pid(self._pid_file, timeout)
        self._ready_file.unlink(missing_ok=True)
        return stopped

    def _rest(self, path: str, method: str = "GET", body: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            self.resourcemanager_web + "/ws/v1/cluster" + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer

    def applications(self) -> list[dict[str, Any]]:
        """YARN's reports of every application it knows: id, name, state, finalStatus, ..."""
        apps: list[dict[str, Any]] = (self._rest("/apps").get("apps") or {}).get("app") or []
        return apps

    def application(self, app_id: str) -> dict[str, Any]:
        app: dict[str, Any] = self._rest(f"/apps/{app_id}")["app"]
        return app

    def attempts(self, app_id: str) -> list[dict[str, Any]]:
        """The application's attempts, oldest first, each with its AM `containerId`."""
        attempts: list[dict[str, Any]] = self._rest(f"/apps/{app_id}/appattempts")["appAttempts"]["appAttempt"]
        return attempts

    def kill_application(self, app_id: str) -> None:
        """Asks the ResourceManager to kill the application, as `yarn application -kill` does."""
        self._rest(f"/apps/{app_id}/state", method="PUT", body={"state": "KILLED"})

    def kill_container(self, container_id: str) -> int:
        """SIGKILLs a running container's whole process group (the driver JVM and its Python), as a
        lost node would; finds it by the PID file its NodeManager keeps. Returns that PID."""
        found = sorted(self.home.glob(f"work/**/nmPrivate/*/{container_id}/{container_id}.pid"))
        if not found:
            raise LookupError(f"container {container_id}: no PID file under {self.home / 'work'}")
        pid = int(found[0].read_text().strip())
        os.killpg(pid, signal.SIGKILL)  # the container runs in its own session, led by this PID
        return pid


def dev_hadoop(root: Path | None = None) -> LocalHadoop:
    """The development cluster: NameNode on 19800, under `.cache/dev/yarn/`."""
    return LocalHadoop((root or cache_dir() / "dev") / "yarn", 19800)
