"""An annotator, in headless Chromium (Debian's, driven by Playwright), labels a routed task in the
real Label Studio UI; `ptf annotate pull` then folds that label into curated_samples.

The screenshots are kept under .ptf/test-artifacts/ (labelstudio-task.png, labelstudio-submitted.png).
"""

from __future__ import annotations

import sqlite3
import time

import httpx
import pytest

from ptfactory.storage.assetstore import AssetStore
from tests.integration.conftest import ARTIFACTS, LabelStudio, launch_chromium, ls_yaml
from tests.integration.test_labelstudio import _routed_rows, _stage

pytestmark = pytest.mark.integration

BATCH = "review-browser"


def test_annotator_labels_in_browser(label_studio: LabelStudio, monkeypatch: pytest.MonkeyPatch) -> None:
    from playwright.sync_api import expect, sync_playwright

    ls = label_studio
    table = _routed_rows(BATCH, tag="browser ").slice(0, 3)
    (ls.root / "factory.yaml").write_text(ls_yaml(f"port: {ls.port}, project_prefix: browser"))
    try:
        _stage(ls, table, BATCH, monkeypatch)
        pushed = ls.ptf("annotate", "push", "--batch", BATCH)
        assert pushed.returncode == 0, pushed.stderr[-3000:]
        row = table.to_pylist()[0]
        with sqlite3.connect(ls.home / "annotation" / "ledger.sqlite") as db:
            project, task = db.execute(
                "SELECT project_id, task_id FROM pushed WHERE sample_id = ?", (row["sample_id"],)
            ).fetchone()
        instruction = row["messages"][0]["content"]
        response = row["messages"][-1]["content"]
        annotator = ls.annotators["ann1@example.com"]

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{ls.url}/user/login/")
                page.fill("input[name=email]", "ann1@example.com")
                page.fill("input[name=password]", annotator["password"])
                page.click("button[type=submit], input[type=submit]")
                page.wait_for_load_state("networkidle")
                assert "/user/login" not in page.url, "login failed"

                page.goto(f"{ls.url}/projects/{project}/data?task={task}")
                # the labeling panel's text (the data manager's table shows the instruction too)
                panel = page.locator(".lsf-richtext__line")
                panel.filter(has_text=instruction).first.wait_for(timeout=120_000)
                page.wait_for_timeout(1000)  # let the panel finish rendering for the screenshot
                page.screenshot(path=str(ARTIFACTS / "labelstudio-task.png"))
                expect(panel.filter(has_text=response).first).to_be_visible(timeout=30_000)
                expect(panel.filter(has_text="llm (m): 8/10").first).to_be_visible()  # the judges' votes
                accept = page.locator("label:has-text('accept') input").first
                reject = page.locator("label:has-text('reject') input").first
                # a judge's vote is pre-filled as the starting annotation
                assert accept.is_checked() or reject.is_checked()
                if not accept.is_checked():
                    page.locator("label:has-text('accept')").first.click()
                assert accept.is_checked()
                page.get_by_role("button", name="Submit").click()
                page.get_by_text("Annotation saved successfully", exact=True).wait_for(timeout=60_000)
                page.screenshot(path=str(ARTIFACTS / "labelstudio-submitted.png"))
            finally:
                browser.close()

        # the annotation exists, made by the annotator (not the admin)
        http = httpx.Client(base_url=ls.url, headers={"Authorization": f"Token {ls.admin_token()}"})
        deadline = time.monotonic() + 30
        annotations: list[dict[str, object]] = []
        while time.monotonic() < deadline and not annotations:
            annotations = http.get(f"/api/tasks/{task}/annotations/").json()
        assert len(annotations) == 1

        pulled = ls.ptf("annotate", "pull")
        assert pulled.returncode == 0, pulled.stderr[-3000:]
        curated = {r["sample_id"]: r for r in AssetStore(str(ls.home)).read("curated_samples").to_pylist()}
        got = curated[row["sample_id"]]
        review = [d for d in got["decisions"] if d["stage"] == "review"]
        assert review[-1]["verdict"] == "accept"
        assert got["annotation"]["annotator"] == "ann1@example.com"
        assert got["annotation"]["task_id"] == task
    finally:
        (ls.root / "factory.yaml").write_text(ls_yaml(f"port: {ls.port}, pull_page: 10"))


def test_annotator_marks_the_first_wrong_step_of_a_trajectory(
    label_studio: LabelStudio, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect, sync_playwright

    from ptfactory.storage.schema import from_records
    from tests.annotators.test_trajectory_review import LS, WRONG, trajectory

    ls, batch = label_studio, "review-trajectory"
    row = {**trajectory([LS, WRONG], solved=False), "batch": batch}
    (ls.root / "factory.yaml").write_text(ls_yaml(f"port: {ls.port}, project_prefix: browser"))
    try:
        _stage(ls, from_records([row]), batch, monkeypatch)
        pushed = ls.ptf("annotate", "push", "--batch", batch)
        assert pushed.returncode == 0, pushed.stderr[-3000:]
        with sqlite3.connect(ls.home / "annotation" / "ledger.sqlite") as db:
            project, task, queue = db.execute(
                "SELECT project_id, task_id, queue FROM pushed WHERE sample_id = ?", (row["sample_id"],)
            ).fetchone()
        assert queue == "agent"
        annotator = ls.annotators["ann1@example.com"]
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1400})
                page.goto(f"{ls.url}/user/login/")
                page.fill("input[name=email]", "ann1@example.com")
                page.fill("input[name=password]", annotator["password"])
                page.click("button[type=submit], input[type=submit]")
                page.wait_for_load_state("networkidle")
                page.goto(f"{ls.url}/projects/{project}/data?task={task}")
                # each step is a paragraph: the call, its exit code, its output
                page.get_by_text("exit code 1").first.wait_for(timeout=120_000)
                step = page.locator("label:has-text('step 2: write_file')").first
                expect(step).to_be_visible(timeout=30_000)
                step.click()
                reject = page.locator("label:has-text('reject') input").first
                if not reject.is_checked():  # the judge's 4/10 comes pre-filled as a reject
                    page.locator("label:has-text('reject')").first.click()
                assert reject.is_checked()
                page.wait_for_timeout(500)
                page.screenshot(path=str(ARTIFACTS / "labelstudio-trajectory.png"))
                page.get_by_role("button", name="Submit").click()
                page.get_by_text("Annotation saved successfully", exact=True).wait_for(timeout=60_000)
            finally:
                browser.close()
        pulled = ls.ptf("annotate", "pull")
        assert pulled.returncode == 0, pulled.stderr[-3000:]
        curated = {r["sample_id"]: r for r in AssetStore(str(ls.home)).read("curated_samples").to_pylist()}
        got = curated[row["sample_id"]]
        assert [(s["step"], s["label"]) for s in got["step_labels"]] == [(0, "ok"), (1, "first_error")]
        assert got["step_labels"][1]["annotator"] == "ann1@example.com"
        assert got["decisions"][-1]["reason"] == "human_reject"
    finally:
        (ls.root / "factory.yaml").write_text(ls_yaml(f"port: {ls.port}, pull_page: 10"))
