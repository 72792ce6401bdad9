"""librdkafka settings derived from Apache Kafka's Java client properties.

A flow's `kafka:` map holds the Java client's property names, because that is what Spark's
connector takes and what every Kafka user writes. dr-stream's own clients (admin, poller,
translation, group sync, failover, failback, status) are librdkafka clients: same protocol,
other names, and no Java keystores. `derive` maps one to the other:

- `security.protocol` as is; `sasl.mechanism` -> `sasl.mechanisms`;
- PLAIN and SCRAM: `username`/`password` of the `sasl.jaas.config` login module ->
  `sasl.username`/`sasl.password`;
- OAUTHBEARER with `sasl.oauthbearer.token.endpoint.url`: the module's `clientId`,
  `clientSecret`, `scope` -> `sasl.oauthbearer.method=oidc` and `sasl.oauthbearer.*`; without
  an endpoint, `unsecuredLoginStringClaim_sub` -> librdkafka's unsecured JWT (test clusters);
- trust: inline `ssl.truststore.certificates` -> `ssl.ca.pem`; a PEM truststore file ->
  `ssl.ca.location`; a JKS or PKCS12 truststore -> its certificates as `ssl.ca.pem`;
- client certificate: a PKCS12 keystore -> `ssl.keystore.location`/`.password`; a PEM keystore
  file -> `ssl.certificate.location` and `ssl.key.location`; inline PEM chain and key ->
  `ssl.certificate.pem`, `ssl.key.pem`; `ssl.key.password` as is;
- `ssl.endpoint.identification.algorithm` as is, `""` (off) -> `none`;
- `client.id`, `client.rack`, `metadata.max.age.ms` and the connection and retry backoffs as is.

Every other Java property is for the Java clients only. A
cluster's `librdkafka:` map is applied last: it adds or overrides settings of the Python
clients only. What cannot be derived (Kerberos, a JKS keystore's private key, an unknown
login module) raises `ClientSettingsError`: one line naming the key and what to do instead,
never quoting a secret.

The rule is pure except for reading a Java truststore, which the caller passes in as
`read_truststore(location, type, password) -> PEM text`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

ReadTruststore = Callable[[str, str, str | None], str]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SAME_NAME = ("client.id", "client.rack", "metadata.max.age.ms", "socket.connection.setup.timeout.ms",
             "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms")

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
                   r"\s*(?P<options>.*?)\s*;?\s*$", re.DOTALL)
_OPTION = re.compile(r"""\s*(?P<key>[\w.\-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))""")


class ClientSettingsError(ValueError):
    """`key: what is wrong and what to do`; the caller prefixes the file and cluster."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key, self.message = key, message


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """`<LoginModule> required k="v" k2=v2;` -> (login module class, options)."""
    match = _JAAS.match(text)
    if not match:
        raise ClientSettingsError("sasl.jaas.config",
                                  "not of the form '<LoginModule class> required key=\"value\" ...;'")
    options, rest = {}, match.group("options")
    position = 0
    while position < len(rest.strip()):
        option = _OPTION.match(rest, position)
        if not option:
            raise ClientSettingsError("sasl.jaas.config", f"cannot read the options of {match.group('module')} "
                                      f"from character {position + 1} on (write key=\"value\" pairs)")
        quoted = option.group("quoted")
        options[option.group("key")] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option.group("bare")
        position = option.end()
        while position < len(rest) and rest[position].isspace():
            position += 1
    return match.group("module"), options


def _sasl(java: Mapping[str, str]) -> dict[str, str]:
    # The Java client's default mechanism is GSSAPI.
    mechanism = java.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism == "GSSAPI":
        raise ClientSettingsError("sasl.mechanism", "GSSAPI (Kerberos) is not available to dr-stream's Python "
                                  "clients (their librdkafka is built without it); give dr-stream's principal "
                                  "SCRAM-SHA-512, PLAIN over TLS or OAUTHBEARER")
    if mechanism not in _LOGIN_MODULES:
        known = ", ".join(["GSSAPI", *_LOGIN_MODULES])
        raise ClientSettingsError("sasl.mechanism", f"{mechanism} is not one of {known}")
    jaas = java.get("sasl.jaas.config")
    if not jaas:
        raise ClientSettingsError("sasl.jaas.config", f"is required with sasl.mechanism {mechanism} "
                                  "(the login module and its credentials)")
    module, options = parse_jaas(jaas)
    if module != _LOGIN_MODULES[mechanism]:
        raise ClientSettingsError("sasl.jaas.config", f"sasl.mechanism {mechanism} needs {_LOGIN_MODULES[mechanism]}, "
                                  f"not {module}")
    out = {"sasl.mechanisms": mechanism}
    if mechanism == "OAUTHBEARER":
        return {**out, **_oauthbearer(java, options)}
    for name in ("username", "password"):
        if not options.get(name):
            raise ClientSettingsError("sasl.jaas.config", f"{module} needs a {name} option")
    return {**out, "sasl.username": options["username"], "sasl.password": options["password"]}


def _oauthbearer(java: Mapping[str, str], options: Mapping[str, str]) -> dict[str, str]:
    endpoint = java.get("sasl.oauthbearer.token.endpoint.url")
    if endpoint:
        if not options.get("clientId") or not options.get("clientSecret"):
            raise ClientSettingsError("sasl.jaas.config", "OAUTHBEARER with a token endpoint needs clientId and "
                                      "clientSecret options (the client credentials grant)")
        out = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": endpoint,
               "sasl.oauthbearer.client.id": options["clientId"],
               "sasl.oauthbearer.client.secret": options["clientSecret"]}
        if options.get("scope"):
            out["sasl.oauthbearer.scope"] = options["scope"]
        extensions = {k.removeprefix("extension_"): v for k, v in options.items() if k.startswith("extension_")}
        if extensions:
            out["sasl.oauthbearer.extensions"] = ",".join(f"{k}={v}" for k, v in sorted(extensions.items()))
        return out
    subject = options.get("unsecuredLoginStringClaim_sub")
    if not subject:
        raise ClientSettingsError("sasl.oauthbearer.token.endpoint.url", "OAUTHBEARER needs a token endpoint "
                                  "(client credentials) or, for test clusters, an unsecuredLoginStringClaim_sub")
    return {"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": f"principal={subject}"}


def _trust(java: Mapping[str, str], read_truststore: ReadTruststore) -> dict[str, str]:
    if java.get("ssl.truststore.certificates"):
        return {"ssl.ca.pem": java["ssl.truststore.certificates"]}
    location = java.get("ssl.truststore.location")
    if not location:
        return {}  # the system's trusted CAs, as the JVM's default truststore would
    kind = java.get("ssl.truststore.type", "JKS").upper()
    if kind == "PEM":
        return {"ssl.ca.location": location}
    if kind not in ("JKS", "PKCS12"):
        raise ClientSettingsError("ssl.truststore.type", f"{kind} is not PEM, JKS or PKCS12")
    return {"ssl.ca.pem": read_truststore(location, kind, java.get("ssl.truststore.password"))}


def _identity(java: Mapping[str, str]) -> dict[str, str]:
    """The client certificate (mutual TLS)."""
    out = {}
    if java.get("ssl.keystore.certificate.chain") or java.get("ssl.keystore.key"):
        if not (java.get("ssl.keystore.certificate.chain") and java.get("ssl.keystore.key")):
            raise ClientSettingsError("ssl.keystore.key", "inline PEM keystores need both ssl.keystore.key and "
                                      "ssl.keystore.certificate.chain")
        out = {"ssl.certificate.pem": java["ssl.keystore.certificate.chain"], "ssl.key.pem": java["ssl.keystore.key"]}
    elif java.get("ssl.keystore.location"):
        location = java["ssl.keystore.location"]
        kind = java.get("ssl.keystore.type", "JKS").upper()
        if kind == "PKCS12":
            out = {"ssl.keystore.location": location}
            if java.get("ssl.keystore.password"):
                out["ssl.keystore.password"] = java["ssl.keystore.password"]
            return out
        if kind == "PEM":
            out = {"ssl.certificate.location": location, "ssl.key.location": location}
        else:
            raise ClientSettingsError("ssl.keystore.type", f"a {kind} keystore's private key cannot be read by "
                                      "dr-stream's Python clients; convert it to PKCS12 (keytool -importkeystore "
                                      "-deststoretype PKCS12) and set ssl.keystore.type: PKCS12")
    if out and java.get("ssl.key.password"):
        out["ssl.key.password"] = java["ssl.key.password"]
    return out


def derive(java: Mapping[str, str], overrides: Mapping[str, str] | None,
           read_truststore: ReadTruststore) -> dict[str, str]:
    """librdkafka settings for a cluster whose Java client properties are `java`."""
    protocol = java.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientSettingsError("security.protocol", f"{protocol} is not one of {', '.join(PROTOCOLS)}")
    settings = {k: java[k] for k in SAME_NAME if k in java}
    if protocol != "PLAINTEXT":
        settings["security.protocol"] = protocol
    if protocol.startswith("SASL"):
        settings.update(_sasl(java))
    if protocol.endswith("SSL"):
        settings.update(_trust(java, read_truststore))
        settings.update(_identity(java))
        algorithm = java.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            settings["ssl.endpoint.identification.algorithm"] = algorithm.strip().lower() or "none"
    return {**settings, **(overrides or {})}

