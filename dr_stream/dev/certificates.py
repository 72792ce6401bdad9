"""A throw-away certificate authority for local secured clusters (tests, the secured demo).

Made with openssl and keytool, at the time it is needed, in one directory: a CA, a broker
certificate for 127.0.0.1 and localhost, and a client certificate for mutual TLS, each in the
forms Kafka users hand over (PEM, PKCS12, JKS). Nothing here is for production.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dr_stream.dev.commands import run

STORE_PASSWORD = "dr-stream-test-store"


@dataclass(frozen=True)
class Pki:
    home: Path

    @property
    def ca_pem(self) -> Path:
        return self.home / "ca.pem"

    @property
    def truststore_jks(self) -> Path:
        return self.home / "truststore.jks"

    @property
    def truststore_p12(self) -> Path:
        return self.home / "truststore.p12"

    @property
    def broker_keystore(self) -> Path:
        return self.home / "broker.p12"

    @property
    def client_keystore(self) -> Path:
        return self.home / "client.p12"

    @property
    def client_pem(self) -> Path:
        """The client's private key and certificate chain in one PEM file."""
        return self.home / "client.pem"


def make_ca(home: Path, subject: str, days: int = 2) -> None:
    """`ca.key` and the self-signed `ca.pem` under `home`."""
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", str(days), "-subj", subject, cwd=home)


def signed(home: Path, name: str, subject: str, extensions: str, days: int = 2) -> None:
    """`<name>.key` and `<name>.crt` under `home`, signed by its `ca.pem` / `ca.key`."""
    run("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
        f"{name}.csr", "-subj", subject, cwd=home)
    (home / f"{name}.ext").write_text(extensions)
    run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", str(days), "-sha256", "-extfile", f"{name}.ext", cwd=home)


def _signed_with_stores(home: Path, name: str, subject: str, extensions: str) -> None:
    signed(home, name, subject, extensions)
    run("openssl", "pkcs12", "-export", "-in", f"{name}.crt", "-inkey", f"{name}.key", "-certfile", "ca.pem",
        "-name", name, "-out", f"{name}.p12", "-passout", f"pass:{STORE_PASSWORD}", cwd=home)


def make_pki(home: Path, client_cn: str = "drs-client") -> Pki:
    """Creates the CA and certificates under `home` (again only when missing)."""
    pki = Pki(home)
    if pki.client_pem.exists():
        return pki
    home.mkdir(parents=True, exist_ok=True)
    make_ca(home, "/CN=dr-stream test CA")
    _signed_with_stores(home, "broker", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed_with_stores(home, "client", f"/CN={client_cn}", "extendedKeyUsage=clientAuth\n")
    pki.client_pem.write_text((home / "client.key").read_text() + (home / "client.crt").read_text()
                              + pki.ca_pem.read_text())
    for store, kind in ((pki.truststore_jks, "JKS"), (pki.truststore_p12, "PKCS12")):
        run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", store.name,
            "-storetype", kind, "-storepass", STORE_PASSWORD, cwd=home)
    return pki
