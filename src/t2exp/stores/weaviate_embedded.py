"""``store.connection=embedded``: a Weaviate server started by weaviate-client v4
(``connect_to_embedded``) as a child process, from a binary the user provides. Nothing is
downloaded from the internet: ``store.binary`` is the server binary itself (linked where the client
looks for it) or a URL of its release tarball on a host the cluster reaches (localhost)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from t2exp.infra.contained import remove_file

# what store.binary may be, said when it is missing (the config's check, before any work)
PRESEEDED = (
    "the Weaviate server binary you provide, as store.connection=embedded downloads nothing: the path of the file "
    "`weaviate` from a release tarball (weaviate-v1.40.3-linux-amd64.tar.gz from github.com/weaviate/weaviate/releases), "
    "or an http://localhost URL of that tarball (.tar.gz or .zip); the server's data go under store.embedded_dir"
)


def is_url(binary: str) -> bool:
    return binary.startswith(("http://", "https://"))


def preseeded(binary: str | None) -> bool:
    """``store.binary`` names a server binary that is there, or a tarball URL the client accepts."""
    if not binary:
        return False
    if is_url(binary):
        return binary.endswith((".tar.gz", ".zip"))
    return Path(binary).expanduser().is_file()


def embedded_options(binary: str, embedded_dir: str, host: str, http_port: int, grpc_port: int) -> Any:
    """The client's ``EmbeddedOptions``: data in ``<embedded_dir>/data``, the binary in
    ``<embedded_dir>/bin``. The client runs ``<bin>/weaviate-v<version>-<sha256 of v<version>>`` and
    downloads it when that file is absent; a binary given as a path is linked there under that name."""
    from weaviate.embedded import WEAVIATE_VERSION, EmbeddedOptions

    root = Path(embedded_dir).expanduser()
    bin_dir = root / "bin"
    version = binary if is_url(binary) else WEAVIATE_VERSION
    if not is_url(binary):
        tag = f"v{version}"
        link = bin_dir / f"weaviate-{tag}-{hashlib.sha256(tag.encode('utf-8')).hexdigest()}"
        bin_dir.mkdir(parents=True, exist_ok=True)
        tmp = link.with_name(f"{link.name}.{os.getpid()}")
        remove_file(tmp, bin_dir, missing_ok=True)
        tmp.symlink_to(Path(binary).expanduser().resolve())
        os.replace(tmp, link)  # another cell's link to an earlier binary is replaced whole
    return EmbeddedOptions(
        persistence_data_path=str(root / "data"),
        binary_path=str(bin_dir),
        version=version,
        port=int(http_port),
        hostname=host,
        grpc_port=int(grpc_port),
    )
