"""OCI image archives written without Docker, for the dev Kubernetes' containerd to import.

An image here is a list of layers, each a directory tree or a set of files, and a config (entry
point, environment, working directory). `write_archive` lays it out as an OCI image layout in
one tar (`oci-layout`, `index.json`, content-addressed blobs), which `ctr images import` takes.

Invariants: the archive's bytes depend only on the inputs (sorted entries, fixed times, owner
root), so building it twice gives the same digests; a layer's digest is of its gzip stream and
its diff id of the tar inside, as the image spec wants.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class FileEntry:
    """One file of a layer: its path in the image, its bytes, its mode."""

    path: str
    data: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class ImageConfig:
    entrypoint: list[str]
    env: list[str] = field(default_factory=lambda: [DEFAULT_PATH])
    working_dir: str = "/"
    user: str = ""


@dataclass(frozen=True)
class Blob:
    digest: str
    data: bytes


def _blob(data: bytes) -> Blob:
    return Blob("sha256:" + hashlib.sha256(data).hexdigest(), data)


def _tar_info(name: str, size: int = 0, mode: int = 0o644, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type, info.mtime = size, mode, kind, 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def layer_tar(files: Iterable[FileEntry]) -> bytes:
    """An uncompressed layer with `files` and every directory above them."""
    out = io.BytesIO()
    entries = sorted(files, key=lambda f: f.path)
    directories = sorted({"/".join(f.path.strip("/").split("/")[:i])
                          for f in entries for i in range(1, len(f.path.strip("/").split("/")))})
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in directories:
            tar.addfile(_tar_info(directory + "/", mode=0o755, kind=tarfile.DIRTYPE))
        for entry in entries:
            tar.addfile(_tar_info(entry.path.strip("/"), len(entry.data), entry.mode), io.BytesIO(entry.data))
    return out.getvalue()


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


@dataclass(frozen=True)
class Layer:
    """A gzipped layer in a file: its digest (of the gzip stream), diff id (of the tar) and size."""

    path: Path
    digest: str
    diff_id: str
    size: int

    def save(self, facts: Path) -> None:
        facts.write_text(json.dumps({"digest": self.digest, "diff_id": self.diff_id, "size": self.size}))

    @staticmethod
    def load(facts: Path, path: Path) -> Layer:
        known = json.loads(facts.read_text())
        return Layer(path, known["digest"], known["diff_id"], known["size"])


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to `target`."""

    def __init__(self, target: io.BufferedWriter | _Hashing | gzip.GzipFile) -> None:
        self.target, self.sha, self.size = target, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.sha.update(data)
        self.size += len(data)
        self.target.write(data)
        return len(data)


def layer_from_tar(data: bytes, path: Path) -> Layer:
    """A layer file at `path` from an uncompressed tar in memory (`layer_tar`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    packed = _gzip(data)
    path.write_bytes(packed)
    return Layer(path, "sha256:" + hashlib.sha256(packed).hexdigest(), "sha256:" + hashlib.sha256(data).hexdigest(),
                 len(packed))


def layer_from_directory(root: Path, path: Path) -> Layer:
    """A layer file at `path` of the tree under `root` as it is (links, modes, owners; times
    zero), streamed: a root file system of a few hundred MB never sits in memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as raw:
        packed = _Hashing(raw)
        with gzip.GzipFile(fileobj=packed, mode="wb", compresslevel=6, mtime=0) as zipped:
            plain = _Hashing(zipped)
            # a stream ("w|"): tarfile never seeks in what it writes to
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for entry in sorted(root.rglob("*")):
                    info = tar.gettarinfo(str(entry), arcname=str(entry.relative_to(root)))
                    if info.ischr() and info.devmajor == 0 and info.devminor == 0:
                        # an overlay's record of a deletion: the image spec's whiteout file
                        tar.addfile(_tar_info(str(entry.relative_to(root).with_name(".wh." + entry.name))))
                        continue
                    info.mtime = 0  # owners stay as they are: a root file system has groups of its own
                    if info.isfile():
                        with entry.open("rb") as handle:
                            tar.addfile(info, handle)
                    else:
                        tar.addfile(info)
    return Layer(path, "sha256:" + packed.sha.hexdigest(), "sha256:" + plain.sha.hexdigest(), packed.size)


def _manifest(layers: list[Layer], config: ImageConfig) -> tuple[Blob, Blob]:
    """The manifest and the config blob for these layers."""
    config_json = {
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": config.entrypoint, "Env": config.env, "WorkingDir": config.working_dir,
                   **({"User": config.user} if config.user else {})},
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
    }
    config_blob = _blob(json.dumps(config_json, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_blob.digest, "size": len(config_blob.data)},
        "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": layer.digest, "size": layer.size} for layer in layers],
    }
    return _blob(json.dumps(manifest, sort_keys=True).encode()), config_blob


def write_archive(path: Path, name: str, layers: list[Layer], config: ImageConfig) -> str:
    """Writes the image `name` (`registry/repository:tag`) as an OCI layout tar at `path`;
    returns the manifest's digest."""
    manifest, config_blob = _manifest(layers, config)
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": MANIFEST_MEDIA_TYPE, "digest": manifest.digest, "size": len(manifest.data),
        "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]},
    }]}
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(path.name + ".tmp")
    with tarfile.open(staging, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(member: str, data: bytes) -> None:
            tar.addfile(_tar_info(member, len(data)), io.BytesIO(data))

        add("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add("index.json", json.dumps(index, sort_keys=True).encode())
        for blob in (manifest, config_blob):
            add("blobs/sha256/" + blob.digest.removeprefix("sha256:"), blob.data)
        for layer in layers:
            with layer.path.open("rb") as handle:
                tar.addfile(_tar_info("blobs/sha256/" + layer.digest.removeprefix("sha256:"), layer.size), handle)
    staging.replace(path)
    return manifest.digest
