"""The ACL ledger in the flow's state: what the flow created, read back by a later process."""

from __future__ import annotations

from dr_stream.core.acl_mapping import Acl
from dr_stream.core.config import ClusterConfig, parse_flow
from dr_stream.kafka.cluster_context import ClusterContext
from dr_stream.replication.acl_ledger import AclLedger, taken_over
from dr_stream.runtime.delta_appends import DeltaAppends
from dr_stream.runtime.delta_reads import DeltaReads

# rows are in the state, so no ledger here looks for an earlier version's on the destination
NOWHERE = ClusterContext(ClusterConfig("b", "127.0.0.1:2"))


def acl(name: str, operation: str = "READ") -> Acl:
    return Acl("TOPIC", name, "LITERAL", "User:app", "*", operation, "ALLOW")


def ledger(tmp_path) -> AclLedger:
    config = parse_flow({"source": {"alias": "a", "bootstrap_servers": "127.0.0.1:1"},
                         "destination": {"alias": "b", "bootstrap_servers": "127.0.0.1:2"},
                         "streaming": {"checkpoint_dir": str(tmp_path / "checkpoints"),
                                       "offset_index": str(tmp_path / "index")}}, "f.yaml")
    return AclLedger(config, DeltaReads(None), DeltaAppends())


def test_what_one_process_created_and_removed_a_later_one_reads_back_from_the_state(tmp_path):
    first = ledger(tmp_path)
    first.record({acl("orders"), acl("payments"), acl("refunds")}, True)
    first.record({acl("payments")}, False)
    assert first.path == f"{tmp_path}/checkpoints/acls"
    later = ledger(tmp_path)
    assert later.held(set(), set(), NOWHERE, print) == {acl("orders"), acl("refunds")}
    later.record({acl("payments")}, True)  # created again after its removal
    assert ledger(tmp_path).held(set(), set(), NOWHERE, print) == {acl("orders"), acl("refunds"), acl("payments")}


def test_an_earlier_versions_entry_is_taken_over_only_if_the_flow_could_have_created_it():
    recorded = {acl("orders"), acl("operators-own"), acl("revoked")}
    wanted, there = {acl("orders"), acl("payments")}, {acl("orders"), acl("operators-own"), acl("revoked")}
    kept, left = taken_over(recorded, wanted, there)
    assert kept == {acl("orders")} and left == {acl("operators-own"), acl("revoked")}
