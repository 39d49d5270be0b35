"""Loading a Hugging Face model as one line when it cannot be had: offline (``HF_HUB_OFFLINE=1``,
the usual state of a compute node) and not in the local cache, a typo in a model id, or a
revision that does not exist. Every loader of a hub model (embedder, cross-encoder, generator)
goes through :func:`load`, so the message and its fix are the same everywhere."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from t2exp.errors import ConfigError, causes, one_line

T = TypeVar("T")


def _missing_model(exc: BaseException) -> bool:
    """An error that means "the weights are not here and cannot be fetched"."""
    names = {type(e).__name__ for e in causes(exc)}
    if names & {
        "LocalEntryNotFoundError",
        "RepositoryNotFoundError",
        "RevisionNotFoundError",
        "GatedRepoError",
        "HFValidationError",
        "EntryNotFoundError",
    }:
        return True
    text = " ".join(str(e) for e in causes(exc))
    return isinstance(exc, OSError) and ("huggingface.co" in text or "is not a local folder" in text or "offline" in text.lower())


def is_path(model: str) -> bool:
    """``model`` names a local directory, not a hub id (``org/name``): it starts with ``/``, ``.``
    or ``~``, or has a backslash or more than one ``/`` (sentence-transformers' rule)."""
    return model.startswith(("/", ".", "~")) or "\\" in model or model.count("/") > 1


def missing_path(group: str, model: str | None) -> ConfigError | None:
    """The one line for ``<group>.model`` naming a local directory that is not there; None otherwise."""
    if not model or not is_path(model):
        return None
    where = Path(model).expanduser()
    if where.is_dir():
        return None
    fault = "a file, not a directory" if where.exists() else "no such directory"
    return ConfigError(
        f"{group}.model={model!r} is invalid: {fault} ({os.path.abspath(where)}); allowed: the directory of a saved model (its "
        f"config.json and weights): point {group}.model at it, or at a hub id (org/name) to load from the Hugging Face cache"
    )


def check_path(group: str, model: str | None) -> None:
    """Before any work (the schema's check): a ``<group>.model`` naming a local directory that is not there."""
    if (error := missing_path(group, model)) is not None:
        raise error


def load(loader: Callable[[], T], group: str, model: str, revision: str | None = None) -> T:
    """``loader()``; a missing model becomes one ``ConfigError`` naming the group, model id (or
    local path), revision and what to do."""
    try:
        return loader()
    except Exception as exc:  # classified below; anything else propagates unchanged
        if (local := missing_path(group, model)) is not None:
            raise local from None
        if isinstance(exc, (OSError, ValueError)) and Path(model).expanduser().is_dir():  # a folder, but no model
            raise ConfigError(
                f"{group}.model={model!r} is invalid: {os.path.abspath(Path(model).expanduser())} holds no model this loader reads "
                f"({type(exc).__name__}: {one_line(str(exc).splitlines()[0] if str(exc) else '', 200)}); allowed: the "
                f"directory of a saved model (its config.json and weights): point {group}.model at it"
            ) from None
        if not _missing_model(exc):
            raise
        rev = f" --revision {revision}" if revision else ""
        offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
        where = "not in the local Hugging Face cache and HF_HUB_OFFLINE is set" if offline else "cannot be loaded from the hub"
        raise ConfigError(
            f"{group}.model={model!r} (revision {revision or 'default'}) is invalid: {where}; allowed: a model you have locally — "
            f"download it where the hub is reachable (hf download {model}{rev}), point {group}.model at a local "
            f"directory{'' if not offline else ', or unset HF_HUB_OFFLINE'} ({type(exc).__name__})"
        ) from None


# models loaded in this process, most recently used last: the cells of a sweep that runs in one
# process (the basic launcher), and every in-process run of the tests, load a model's weights once
KEEP_LOADED = 3
_loaded: OrderedDict[Hashable, Any] = OrderedDict()
_loaded_lock = threading.Lock()


def shared(key: Hashable, loader: Callable[[], T]) -> T:
    """The model ``loader()`` builds, loaded once per process for ``key`` (everything that decides
    the loaded object: kind, path or id, revision, dtype, device, ...); the ``KEEP_LOADED`` most
    recently used stay loaded, older ones are released to the garbage collector."""
    with _loaded_lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
    value = loader()
    with _loaded_lock:
        _loaded[key] = value
        _loaded.move_to_end(key)
        while len(_loaded) > KEEP_LOADED:
            _loaded.popitem(last=False)
    return value
