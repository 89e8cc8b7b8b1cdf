"""A real S3 API server (moto, on 127.0.0.1) for the object-store tests, started once per session."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

# what makes boto3 and s3fs talk to the test server, in this process and every child it starts
_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "ptf-test",
    "AWS_SECRET_ACCESS_KEY": "ptf-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a moto S3 server, exported as ``AWS_ENDPOINT_URL`` (which boto3
    and s3fs both read) with dummy credentials, for the whole session."""
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with log.open("wb") as errors:
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.storage.moto_s3"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # blocks until the server listens (or dies)
        if not line.startswith("PORT "):
            raise RuntimeError(f"the moto S3 server did not start: {log.read_text()[-2000:]}")
        endpoint = f"http://127.0.0.1:{int(line.split()[1])}"
        with pytest.MonkeyPatch.context() as patch:
            for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
                patch.delenv(key, raising=False)
            for key, value in {**_AWS_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
                patch.setenv(key, value)
            yield endpoint
    finally:
        server.kill()
        server.wait(10)


def s3_client() -> Any:
    import boto3

    return boto3.client("s3")


@pytest.fixture
def s3_home(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://<fresh bucket>/home`` as PTF_HOME; the local state (catalog) goes to ``tmp_path/.ptf``."""
    bucket = f"ptf-{uuid.uuid4().hex[:12]}"
    s3_client().create_bucket(Bucket=bucket)
    home = f"s3://{bucket}/home"
    monkeypatch.setenv("PTF_HOME", home)
    monkeypatch.chdir(tmp_path)
    return home


def keys(home: str, under: str = "") -> list[str]:
    """Every object key below ``home`` (starting with ``under``), relative to ``home``, from the server."""
    bucket, _, root = home.removeprefix("s3://").partition("/")
    found = []
    pages = s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/{under}")
    for page in pages:
        found += [item["Key"][len(root) + 1 :] for item in page.get("Contents", [])]
    return sorted(found)
