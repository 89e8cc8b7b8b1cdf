"""In the real Label Studio UI (headless Chromium): a review task's corrected-response box starts
with the response, and submitting it unchanged is an accept; an audit task sits in its own
project, shows no judges' votes and pre-fills nothing, and its label is curated like any other.

Screenshots: .ptf/test-artifacts/labelstudio-review-prefill.png, labelstudio-audit-blind.png.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import pyarrow as pa
import pytest

from ptfactory.storage.assetstore import AssetStore
from tests.integration.conftest import ARTIFACTS, LabelStudio, launch_chromium, ls_yaml
from tests.integration.test_labelstudio import _routed_rows, _stage

pytestmark = pytest.mark.integration

BATCH = "review-prefill"
PREFIX = "prefill"


def _rows() -> pa.Table:
    """Two SFT rows: one the judges dispute (routed to review), one they agree on (auto-accepted,
    then drawn for the blind audit: routing.audit_rate is 1 here)."""
    table = _routed_rows(BATCH, tag="prefill ").slice(0, 2)
    rows = table.to_pylist()
    for vote in rows[1]["scores"]["judges"]:
        vote["score"] = 8.0
    rows[1]["scores"].update(judge_mean=8.0, judge_spread=0.0)
    return pa.Table.from_pylist(rows, schema=table.schema)


def _login(page: Any, ls: LabelStudio) -> None:
    page.goto(f"{ls.url}/user/login/")
    page.fill("input[name=email]", "ann1@example.com")
    page.fill("input[name=password]", ls.annotators["ann1@example.com"]["password"])
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state("networkidle")
    assert "/user/login" not in page.url, "login failed"


def _open(page: Any, ls: LabelStudio, project: int, task: int, instruction: str) -> Any:
    page.goto(f"{ls.url}/projects/{project}/data?task={task}")
    panel = page.locator(".lsf-richtext__line")
    panel.filter(has_text=instruction).first.wait_for(timeout=120_000)
    page.wait_for_timeout(1000)
    return panel


def _submit(page: Any) -> None:
    page.get_by_role("button", name="Submit").click()
    page.get_by_text("Annotation saved successfully", exact=True).wait_for(timeout=60_000)


def test_review_box_prefilled_and_audit_blind(
    label_studio: LabelStudio, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect, sync_playwright

    ls = label_studio
    table = _rows()
    review, audit = table.to_pylist()
    (ls.root / "factory.yaml").write_text(
        ls_yaml(
            f"port: {ls.port}, project_prefix: {PREFIX}", "review_budget: 10, audit_rate: 1, audit_budget: 1"
        )
    )
    try:
        _stage(ls, table, BATCH, monkeypatch)
        pushed = ls.ptf("annotate", "push", "--batch", BATCH)
        assert pushed.returncode == 0, pushed.stderr[-3000:]
        assert "sft-audit queue at" in pushed.stdout and "1 new audit tasks" in pushed.stdout
        with sqlite3.connect(ls.home / "annotation" / "ledger.sqlite") as db:
            where = {
                sid: (project, task, queue)
                for sid, project, task, queue in db.execute(
                    "SELECT sample_id, project_id, task_id, queue FROM pushed"
                )
            }
        assert where[review["sample_id"]][2] == "sft" and where[audit["sample_id"]][2] == "sft-audit"
        http = httpx.Client(
            base_url=ls.url, headers={"Authorization": f"Token {ls.admin_token()}"}, timeout=60
        )
        blind = http.get(f"/api/tasks/{where[audit['sample_id']][1]}").json()
        assert blind["data"]["audit"] is True and "judges" not in blind["data"]
        assert not blind.get("predictions")

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                _login(page, ls)
                project, task, _ = where[review["sample_id"]]
                panel = _open(page, ls, project, task, review["messages"][0]["content"])
                box = page.locator("textarea[name=corrected]").first
                expect(box).to_have_value(review["messages"][-1]["content"], timeout=30_000)
                expect(panel.filter(has_text="llm (m): 8/10").first).to_be_visible()
                page.screenshot(path=str(ARTIFACTS / "labelstudio-review-prefill.png"))
                page.locator("label:has-text('accept')").first.click()
                _submit(page)  # the box as it came: no correction

                project, task, _ = where[audit["sample_id"]]
                panel = _open(page, ls, project, task, audit["messages"][0]["content"])
                expect(page.get_by_text("Blind audit", exact=False).first).to_be_visible()
                expect(page.locator("textarea[name=corrected]").first).to_have_value("")
                assert panel.filter(has_text="llm (m)").count() == 0  # no votes shown
                accept = page.locator("label:has-text('accept') input").first
                reject = page.locator("label:has-text('reject') input").first
                assert not accept.is_checked() and not reject.is_checked()  # nothing pre-filled
                page.screenshot(path=str(ARTIFACTS / "labelstudio-audit-blind.png"))
                page.locator("label:has-text('reject')").first.click()
                _submit(page)
            finally:
                browser.close()

        pulled = ls.ptf("annotate", "pull")
        assert pulled.returncode == 0, pulled.stderr[-3000:]
        curated = {r["sample_id"]: r for r in AssetStore(str(ls.home)).read("curated_samples").to_pylist()}
        reviewed = curated[review["sample_id"]]
        assert reviewed["decisions"][-1]["reason"] == "human_accept"  # unchanged box: not an edit
        assert reviewed["messages"] == review["messages"]
        audited = curated[audit["sample_id"]]
        assert audited["decisions"][-1]["stage"] == "review"
        assert audited["decisions"][-1]["verdict"] == "reject"
    finally:
        (ls.root / "factory.yaml").write_text(ls_yaml(f"port: {ls.port}, pull_page: 10"))
