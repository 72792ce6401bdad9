"""An admin client is never destroyed on librdkafka's own background thread, which would abort the
process: one let go with a request in flight, or held only by a garbage cycle, is destroyed on
dr-stream's releasing thread. The clients run in a child process, since the failure this guards
against ends the process that meets it (a CI run of the whole suite died of it)."""

from __future__ import annotations

import subprocess
import sys

from dr_stream.runtime.paths import project_root

_CHILD = """
import gc, sys, time
from dr_stream.core.config import ClusterConfig
from dr_stream.kafka import clients
from dr_stream.kafka.released_clients import RELEASES

cluster = ClusterConfig("dc1", sys.argv[1])
rounds = int(sys.argv[2])
gc.set_threshold(50)  # the cycle collector runs often, on whichever thread allocates: theirs too


class Owner:
    pass


for _ in range(rounds):
    # let go while its request is in flight: the answer's future holds the last reference
    admin = clients.admin(cluster)
    answer = admin.list_consumer_groups(request_timeout=5)
    del admin, answer
    # held only by a garbage cycle, with a request in flight
    owner = Owner()
    owner.me, owner.admin = owner, clients.admin(cluster)
    owner.answer = owner.admin.list_consumer_groups(request_timeout=5)
    del owner
deadline = time.monotonic() + 60
while RELEASES.released < 2 * rounds and time.monotonic() < deadline:
    gc.collect()
    time.sleep(0.2)
print("released", RELEASES.released)
"""


def test_admin_clients_let_go_with_requests_in_flight_are_destroyed_on_a_thread_of_ours(dc1):
    rounds = 150
    child = subprocess.run([sys.executable, "-c", _CHILD, dc1.bootstrap, str(rounds)], cwd=project_root(),
                           capture_output=True, text=True, timeout=180)
    assert "librdkafka owned thread" not in child.stderr
    assert child.returncode == 0, child.stderr[-3000:]
    assert f"released {2 * rounds}" in child.stdout
