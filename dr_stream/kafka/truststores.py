"""Java truststores (JKS, PKCS12) read as PEM text, for librdkafka's `ssl.ca.pem`.

librdkafka reads PEM trust only; Java users hand over JKS or PKCS12 truststores. keytool,
which ships with every JVM that runs Spark, lists a store's certificates as PEM. Only
certificates are read, in memory: nothing is written to disk, and the store password reaches
keytool through its environment, never its command line (where `ps` would show it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache

from dr_stream.core.librdkafka_settings import ClientSettingsError

_PEM = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)
_PASSWORD_VARIABLE = "DR_STREAM_TRUSTSTORE_PASSWORD"


def _keytool() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "keytool") if home else shutil.which("keytool")
    if not found or not os.path.exists(found):
        raise ClientSettingsError("ssl.truststore.location", "reading a JKS or PKCS12 truststore needs keytool "
                                  "(from the JVM); or give the CA as PEM (ssl.truststore.type: PEM)")
    return found


def read_truststore(location: str, kind: str, password: str | None) -> str:
    """The certificates of the store at `location` as PEM text."""
    if not os.path.isfile(location):
        raise ClientSettingsError("ssl.truststore.location", f"{location}: no such file")
    stat = os.stat(location)
    return _read(location, kind, password, stat.st_mtime_ns, stat.st_size)


@cache
def _read(location: str, kind: str, password: str | None, _mtime: int, _size: int) -> str:
    command = [_keytool(), "-list", "-rfc", "-keystore", location, "-storetype", kind]
    env = dict(os.environ)
    if password:
        command += ["-storepass:env", _PASSWORD_VARIABLE]
        env[_PASSWORD_VARIABLE] = password
    result = subprocess.run(command, input="\n", capture_output=True, text=True, env=env, timeout=60)
    certificates = _PEM.findall(result.stdout)
    if result.returncode != 0 or not certificates:
        output = (result.stdout + result.stderr).lower()
        reason = ("the password is wrong (ssl.truststore.password)" if "password" in output
                  else "keytool could not read it as " + kind)
        raise ClientSettingsError("ssl.truststore.location", f"{location}: {reason}")
    return "\n".join(certificates) + "\n"
