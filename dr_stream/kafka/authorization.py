"""Authorization failures as one line: which principal may not do which operation on what.

A broker with an authorizer answers a request the principal is not allowed to make with
TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED, naming neither the operation nor the ACL
that is missing. dr-stream knows both at the call site (committing a group's offsets needs
READ on the group, reading them DESCRIBE), and the principal from the flow's own client
properties, so it says all three and what the operation was for.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException

from dr_stream.core.librdkafka_settings import parse_jaas

_DENIED = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
           KafkaError.CLUSTER_AUTHORIZATION_FAILED}


class NotAuthorized(RuntimeError):
    """`<cluster>: <principal> may not <OPERATION> <RESOURCE TYPE> <name> (<what for>; grant it ...)`."""


def principal(java: Mapping[str, str]) -> str:
    """The principal a broker sees for these client properties, as far as they tell."""
    protocol = java.get("security.protocol", "PLAINTEXT").upper()
    if protocol.startswith("SASL") and java.get("sasl.jaas.config"):
        _, options = parse_jaas(java["sasl.jaas.config"])
        name = options.get("username") or options.get("clientId") or options.get("unsecuredLoginStringClaim_sub")
        if name:
            return f"User:{name}"
    if protocol == "SSL" and (java.get("ssl.keystore.location") or java.get("ssl.keystore.certificate.chain")):
        return "the principal of its client certificate"
    return "User:ANONYMOUS" if protocol in ("PLAINTEXT", "SSL") else "its principal"


def denied(error: BaseException) -> bool:
    """Whether a client error is the broker's authorizer saying no."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0].code() in _DENIED
    return False


def not_authorized(alias: str, java: Mapping[str, str], operation: str, resource: str,
                   purpose: str) -> NotAuthorized:
    """The one line for a denied `operation` on `resource` ("GROUP app-1")."""
    return NotAuthorized(f"{alias}: {principal(java)} may not {operation} {resource} ({purpose}); "
                         f"grant it: kafka-acls --add --allow-principal {principal(java)} --operation {operation} "
                         f"--{resource.split(' ', 1)[0].lower()} {resource.split(' ', 1)[1]}")
