"""What an atomic publish needs from an object store: a conditional create, server-side copies, listings.

``create_exclusive(path, data)`` writes an object only if none exists at ``path`` and says
whether it did; of any number of callers racing for one path, exactly one gets ``True``. It is
what makes a version claim and a manifest commit safe across machines:

- ``s3://`` (S3, or an S3-compatible server): ``PutObject`` with ``If-None-Match: *`` through boto3
  (s3fs has no conditional put). The first publish to a bucket in a process checks that the
  server honours it (a second conditional put of one key must fail with 412); a server that
  ignores it is refused, never raced.
- ``memory://``: the store lives in this process, so an exists-then-create under a process lock
  is exclusive. Concurrent publishing from other processes cannot happen there.
- any other store: no conditional create ptfactory can use, so publishing is refused unless
  ``PTF_SINGLE_PUBLISHER=1`` says one machine publishes there; that machine's publishers then
  take turns under a local file lock.

Credentials and the endpoint come from wherever s3fs takes them (``AWS_*`` variables such as
``AWS_ENDPOINT_URL``, ``~/.aws``, fsspec's config), so boto3 and s3fs talk to the same server.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from ptfactory.errors import PublishError
from ptfactory.storage.fs import Store

__all__ = ["SINGLE_PUBLISHER_ENV", "FsspecOps", "ObjectInfo", "ObjectOps", "S3Ops", "object_ops"]

SINGLE_PUBLISHER_ENV = "PTF_SINGLE_PUBLISHER"
_COPY_LIMIT = 5 * 1024**3  # CopyObject's limit; larger objects go through a multipart copy
_MEMORY_LOCK = threading.Lock()
_HONOURED: dict[tuple[str | None, str], bool] = {}
_S3_CLIENTS: dict[Any, S3Ops] = {}  # (endpoint, bucket) -> conditional puts honoured


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    modified: float  # unix seconds


class ObjectOps:
    """The operations, on full store paths (``s3://bucket/key`` or as the Store spells them)."""

    def create_exclusive(self, path: str, data: bytes) -> bool:
        raise NotImplementedError

    def put(self, path: str, data: bytes) -> None:
        raise NotImplementedError

    def read(self, path: str) -> bytes | None:
        """The object's bytes, or None if there is none."""
        raise NotImplementedError

    def read_tagged(self, path: str) -> tuple[bytes | None, str | None]:
        """The object's bytes and a tag of this version of it (None, None: there is none)."""
        raise NotImplementedError

    def replace(self, path: str, data: bytes, tag: str | None) -> bool:
        """Write ``data`` only if ``path`` still holds the version ``read_tagged`` tagged ``tag``
        (``None``: only if there is no object): a compare-and-swap. False when someone wrote first."""
        raise NotImplementedError

    def copy(self, src: str, dst: str, size: int) -> None:
        raise NotImplementedError

    def listing(self, prefix: str) -> dict[str, ObjectInfo]:
        """Every object under the folder ``prefix``, by path relative to it (``a/b.parquet``)."""
        raise NotImplementedError

    def delete(self, paths: Iterable[str]) -> None:
        raise NotImplementedError

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object under the folder ``prefix``; returns how many there were."""
        found = self.listing(prefix)
        self.delete(posixpath.join(prefix, key) for key in found)
        return len(found)


class S3Ops(ObjectOps):
    """boto3, built from the s3fs instance's own settings."""

    def __init__(self, fs: Any) -> None:
        try:
            import boto3
            import botocore.exceptions
        except ImportError as exc:
            raise PublishError("boto3 is not installed: pip install 'ptfactory[s3]'") from exc
        self._errors = botocore.exceptions
        options = dict(getattr(fs, "client_kwargs", None) or {})
        self.endpoint = getattr(fs, "endpoint_url", None) or options.pop("endpoint_url", None)
        session = boto3.session.Session(
            aws_access_key_id=getattr(fs, "key", None),
            aws_secret_access_key=getattr(fs, "secret", None),
            aws_session_token=getattr(fs, "token", None),
        )
        kept = {k: v for k, v in options.items() if k in ("region_name", "verify", "use_ssl")}
        config = None
        if getattr(fs, "anon", False):
            from botocore import UNSIGNED
            from botocore.config import Config

            config = Config(signature_version=UNSIGNED)
        self.client = session.client("s3", endpoint_url=self.endpoint, config=config, **kept)
        self.endpoint = self.endpoint or self.client.meta.endpoint_url

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        bucket, _, key = path.split("://", 1)[-1].partition("/")
        return bucket, key

    def _status(self, exc: Exception) -> tuple[int, str]:
        response = getattr(exc, "response", {}) or {}
        status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        return status, str(response.get("Error", {}).get("Code", ""))

    def create_exclusive(self, path: str, data: bytes) -> bool:
        bucket, key = self._split(path)
        for attempt in range(6):
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except self._errors.ClientError as exc:
                status, code = self._status(exc)
                if status == 412 or code == "PreconditionFailed":
                    return False
                if status != 409 or attempt == 5:  # 409: another conditional put of the key in flight
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    def put(self, path: str, data: bytes) -> None:
        bucket, key = self._split(path)
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def read(self, path: str) -> bytes | None:
        bucket, key = self._split(path)
        try:
            return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except self._errors.ClientError as exc:
            status, code = self._status(exc)
            if status == 404 or code in ("NoSuchKey", "404"):
                return None
            raise

    def read_tagged(self, path: str) -> tuple[bytes | None, str | None]:
        bucket, key = self._split(path)
        try:
            found = self.client.get_object(Bucket=bucket, Key=key)
        except self._errors.ClientError as exc:
            status, code = self._status(exc)
            if status == 404 or code in ("NoSuchKey", "404"):
                return None, None
            raise
        return bytes(found["Body"].read()), str(found["ETag"])

    def replace(self, path: str, data: bytes, tag: str | None) -> bool:
        if tag is None:
            return self.create_exclusive(path, data)
        bucket, key = self._split(path)
        for attempt in range(6):
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=data, IfMatch=tag)
                return True
            except self._errors.ClientError as exc:
                status, code = self._status(exc)
                if status in (404, 412) or code in ("PreconditionFailed", "NoSuchKey"):
                    return False  # changed (or removed) since it was read
                if status != 409 or attempt == 5:
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    def copy(self, src: str, dst: str, size: int) -> None:
        (src_bucket, src_key), (bucket, key) = self._split(src), self._split(dst)
        source = {"Bucket": src_bucket, "Key": src_key}
        if size < _COPY_LIMIT:
            self.client.copy_object(Bucket=bucket, Key=key, CopySource=source)
        else:
            self.client.copy(source, bucket, key)

    def listing(self, prefix: str) -> dict[str, ObjectInfo]:
        bucket, key = self._split(prefix)
        key = key.rstrip("/") + "/"
        found: dict[str, ObjectInfo] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
            for item in page.get("Contents", []):
                found[item["Key"][len(key) :]] = ObjectInfo(
                    int(item["Size"]), item["LastModified"].timestamp()
                )
        return found

    def delete(self, paths: Iterable[str]) -> None:
        by_bucket: dict[str, list[str]] = {}
        for path in paths:
            bucket, key = self._split(path)
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), 1000):
                batch = [{"Key": k} for k in keys[start : start + 1000]]
                response = self.client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                if response.get("Errors"):
                    first = response["Errors"][0]
                    raise PublishError(
                        f"could not delete s3://{bucket}/{first.get('Key')}: {first.get('Message')}"
                    )

    def honours_conditional_create(self, folder: str) -> bool:
        """Whether the server refuses a second ``If-None-Match: *`` put of one key (checked once
        per endpoint and bucket in a process, with a probe object under ``folder``)."""
        bucket, _ = self._split(folder)
        known = _HONOURED.get((self.endpoint, bucket))
        if known is not None:
            return known
        probe = posixpath.join(folder, f".ptf-probe-{uuid.uuid4().hex}")
        try:
            honoured = self.create_exclusive(probe, b"1") and not self.create_exclusive(probe, b"2")
        finally:
            self.delete([probe])
        _HONOURED[(self.endpoint, bucket)] = honoured
        return honoured


class FsspecOps(ObjectOps):
    """Plain fsspec calls; ``create_exclusive`` is exists-then-create under ``lock``, so it is only as
    exclusive as the lock is (a process lock for memory://, a machine's file lock otherwise)."""

    def __init__(self, store: Store, lock: AbstractContextManager[Any]) -> None:
        self.store = store
        self.fs = store.fs
        self.lock = lock

    def create_exclusive(self, path: str, data: bytes) -> bool:
        with self.lock:
            if self.store.exists(path):
                return False
            self.fs.pipe_file(path, data)
            return True

    def put(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)

    def read(self, path: str) -> bytes | None:
        if not self.store.exists(path):
            return None
        try:
            return bytes(self.fs.cat_file(path))
        except FileNotFoundError:
            return None

    def read_tagged(self, path: str) -> tuple[bytes | None, str | None]:
        data = self.read(path)
        return (data, hashlib.sha256(data).hexdigest()) if data is not None else (None, None)

    def replace(self, path: str, data: bytes, tag: str | None) -> bool:
        with self.lock:  # as exclusive as the lock, like create_exclusive
            if self.read_tagged(path)[1] != tag:
                return False
            self.fs.pipe_file(path, data)
            return True

    def copy(self, src: str, dst: str, size: int) -> None:
        self.fs.copy(src, dst)

    def listing(self, prefix: str) -> dict[str, ObjectInfo]:
        prefix = prefix.rstrip("/")
        if not self.store.exists(prefix):
            return {}
        found = {}
        root = self.fs._strip_protocol(prefix).rstrip("/") + "/"
        for path, info in _walk(self.fs, prefix):
            stripped = self.fs._strip_protocol(path)
            found[stripped[len(root) :]] = ObjectInfo(int(info.get("size") or 0), _modified(info))
        return found

    def delete(self, paths: Iterable[str]) -> None:
        for path in paths:
            if self.store.exists(path):
                self.fs.rm_file(path)


def _walk(fs: Any, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    found = fs.find(prefix, detail=True)
    for path, info in sorted(found.items()):
        if info.get("type", "file") == "file":
            yield path, info


def _modified(info: dict[str, Any]) -> float:
    for key in ("LastModified", "mtime", "modified", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
    return time.time()


def object_ops(store: Store, state_dir: Path) -> ObjectOps:
    """The operations for ``store``; raises :class:`PublishError` where concurrent publishing would race."""
    single = os.environ.get(SINGLE_PUBLISHER_ENV, "").strip().lower() in ("1", "true", "yes")
    local_lock = FileLock(str(state_dir / "publish-objectstore.lock"))
    protocols = store.protocols
    if {"s3", "s3a"} & set(protocols):
        # a boto3 client takes ~0.4 s to build: one per file system and process (never across a fork)
        token = (os.getpid(), getattr(store.fs, "_fs_token", None) or id(store.fs))
        ops = _S3_CLIENTS.get(token) or _S3_CLIENTS.setdefault(token, S3Ops(store.fs))
        if ops.honours_conditional_create(store.root):
            return ops
        if single:
            return FsspecOps(store, local_lock)
        raise PublishError(
            f"the S3 server at {ops.endpoint} ignores conditional writes (a second PutObject with "
            f"If-None-Match: * of one key succeeded), so two publishers to {store.root} could take the "
            f"same version. Use a server that honours them (AWS S3, recent MinIO), or set "
            f"{SINGLE_PUBLISHER_ENV}=1 if only this machine publishes there"
        )
    if "memory" in protocols:
        return FsspecOps(store, _MEMORY_LOCK)  # the store is this process's: a process lock is exclusive
    if single:
        return FsspecOps(store, local_lock)
    raise PublishError(
        f"{protocols[0]}:// offers no conditional create ptfactory can use, so two machines publishing to "
        f"{store.root} could take the same version. If only this machine publishes there, set "
        f"{SINGLE_PUBLISHER_ENV}=1 (its publishers then take turns under a local lock); to publish "
        "from many machines, use an s3:// store"
    )
