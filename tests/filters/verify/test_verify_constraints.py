"""The constraints verifier: IFEval checks on a response; every check must hold; a check that
needs NLTK data abstains; importing and running the checks fetches nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ptfactory.filters.verify import ConstraintsVerifier
from ptfactory.filters.verify.constraints import constraint_problem

SPECS = [
    {"type": "length_constraints:number_words", "relation": "less than", "num_words": 12},
    {"type": "no_comma"},
    {"type": "keywords:existence", "keywords": ["budget"]},
    {"type": "keywords:forbidden_words", "forbidden_words": ["cheap"]},
    {"type": "starts_with", "start_phrase": "Dear team"},
    {"type": "change_case:english_lowercase"},
]


def row(response: str, specs: list[dict[str, Any]] = SPECS) -> dict[str, Any]:
    return {
        "kind": "sft",
        "messages": [
            {"role": "user", "content": "Write a note."},
            {"role": "assistant", "content": response},
        ],
        "reference": {"answer": None, "source": "constraints", "constraints": json.dumps(specs)},
    }


def test_every_check_must_hold() -> None:
    verifier = ConstraintsVerifier()
    good, bad = verifier.verify_many(
        [
            row("dear team the budget is fine"),
            row("Dear team, the budget is cheap and it is very very long now"),
        ]
    )
    assert (good.verdict, good.score, good.partial) == ("pass", 1.0, 1.0)
    assert [c["held"] for c in good.evidence["checks"]] == [True] * len(SPECS)
    assert (bad.verdict, bad.final) == ("fail", True)
    assert bad.evidence["failed"] == [
        "length_constraints:number_words",
        "punctuation:no_comma",
        "keywords:forbidden_words",
        "change_case:english_lowercase",
    ]
    assert bad.partial == pytest.approx(2 / 6)


def test_formats_json_title_sections_bullets_placeholders() -> None:
    specs = [
        {"type": "detectable_format:title"},
        {"type": "detectable_format:number_bullet_lists", "num_bullets": 2},
        {"type": "detectable_content:number_placeholders", "num_placeholders": 1},
        {"type": "startend:end_checker", "end_phrase": "Any questions?"},
    ]
    text = "<<Plan>>\n* visit [city]\n* rest\nAny questions?"
    assert ConstraintsVerifier().verify(row(text, specs)).passed
    assert ConstraintsVerifier().verify(row("* one\nAny questions?", specs)).evidence["failed"] == [
        "detectable_format:title",
        "detectable_format:number_bullet_lists",
        "detectable_content:number_placeholders",
    ]
    as_json = [{"type": "json_format"}]
    assert ConstraintsVerifier().verify(row('```json\n{"a": 1}\n```', as_json)).passed
    assert ConstraintsVerifier().verify(row("a: 1", as_json)).verdict == "fail"


def test_a_check_that_needs_nltk_data_abstains_unless_another_failed() -> None:
    sentences = [{"type": "number_sentences", "relation": "at least", "num_sentences": 2}]
    verdict = ConstraintsVerifier().verify(row("One. Two.", sentences))
    assert (verdict.verdict, verdict.reason) == ("abstain", "check_unavailable")
    assert verdict.evidence["unavailable"] == ["length_constraints:number_sentences"]
    failing = ConstraintsVerifier().verify(row("One, two.", [*sentences, {"type": "no_comma"}]))
    assert failing.verdict == "fail"  # a fail is known without the unavailable check


def test_specs_are_checked() -> None:
    assert constraint_problem(SPECS) is None
    assert constraint_problem([]) == "constraints must be a non-empty list of constraint objects"
    assert "missing relation" in (constraint_problem([{"type": "number_words", "num_words": 5}]) or "")
    assert "unknown constraint type 'shout'" in (constraint_problem([{"type": "shout"}]) or "")
    assert "constraint 1: " in (
        constraint_problem([{"type": "no_comma"}, {"type": "no_comma", "x": 1}]) or ""
    )
    bad_type = constraint_problem([{"type": "number_words", "relation": "less than", "num_words": "ten"}])
    assert bad_type and "num_words must be a whole number >= 0, got 'ten'" in bad_type


@pytest.mark.parametrize(
    ("spec", "named"),
    [  # IFEval draws a random value for each of these, or iterates a word's letters
        ({"type": "number_bullet_lists", "num_bullets": -1}, "num_bullets"),
        ({"type": "number_words", "relation": "at least", "num_words": True}, "num_words"),
        ({"type": "keywords:existence", "keywords": []}, "keywords"),
        ({"type": "keywords:existence", "keywords": "budget"}, "keywords"),
        ({"type": "keywords:forbidden_words", "forbidden_words": "cheap"}, "forbidden_words"),
        ({"type": "keywords:frequency", "keyword": "", "frequency": 2, "relation": "at least"}, "keyword"),
        (
            {"type": "letter_frequency", "letter": "ab", "let_frequency": 2, "let_relation": "at least"},
            "letter",
        ),
        ({"type": "end_checker", "end_phrase": ""}, "end_phrase"),
        ({"type": "end_checker", "end_phrase": 5}, "end_phrase"),
        ({"type": "postscript", "postscript_marker": ""}, "postscript_marker"),
        (
            {"type": "nth_paragraph_first_word", "num_paragraphs": 1, "nth_paragraph": 5, "first_word": "so"},
            "nth_paragraph",
        ),
    ],
)
def test_a_spec_whose_check_would_be_random_is_refused(spec: dict[str, Any], named: str) -> None:
    problem = constraint_problem([spec])
    assert problem and named in problem, problem


def test_words_are_literal_a_phrase_starts_a_word_and_a_reply_that_only_thinks_has_no_answer() -> None:
    verifier = ConstraintsVerifier()
    cases = [
        ("The ticket costs $5 at the door.", {"type": "keywords:existence", "keywords": ["$5"]}, "pass"),
        ("I would pick Rust for this project.", {"type": "keywords:existence", "keywords": ["C++"]}, "fail"),
        ("It ships in version 305.", {"type": "keywords:existence", "keywords": ["3.5"]}, "fail"),
        ("I love C++ a lot.", {"type": "keywords:forbidden_words", "forbidden_words": ["C++"]}, "fail"),
        ("I love Rust.", {"type": "keywords:forbidden_words", "forbidden_words": ["C++"]}, "pass"),
        ("Cheaper is better.", {"type": "keywords:forbidden_words", "forbidden_words": ["cheap"]}, "pass"),
        ("Cheap is better.", {"type": "keywords:forbidden_words", "forbidden_words": ["cheap"]}, "fail"),
        ("a.b a.b axb", {"type": "keywords:frequency", "keyword": "a.b", "frequency": 3, "relation": "at least"},
         "fail"),
        ("Dear teammates and friends, welcome.", {"type": "starts_with", "start_phrase": "Dear team"}, "fail"),
        ("Dear team, welcome.", {"type": "starts_with", "start_phrase": "Dear team"}, "pass"),
        ("<think>The user wants a list, let me think", {"type": "forbidden_words", "forbidden_words": ["x"]},
         "no_answer"),
    ]  # fmt: skip
    got = verifier.verify_many([row(reply, [spec]) for reply, spec, _ in cases])
    assert [v.verdict for v in got] == [want for _, _, want in cases]
    assert got[-1].reason == "no_answer"


def test_the_language_check_gives_one_verdict_per_reply() -> None:
    spec = [{"type": "response_language", "language": "en"}]
    verdicts = {
        ConstraintsVerifier().verify(row("sure thing, see you at noon", spec)).verdict for _ in range(30)
    }
    assert len(verdicts) == 1


def test_not_applicable_without_constraints() -> None:
    plain = {
        "kind": "sft",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    }
    assert not ConstraintsVerifier().applies(plain)
    assert ConstraintsVerifier().verify(plain).reason == "not_applicable"


_OFFLINE = """
import json, sys
attempts = []
sys.addaudithook(lambda event, args: attempts.append(event) if event.startswith("socket.") else None)
import nltk
nltk.download = lambda *a, **k: attempts.append(("nltk.download", a)) or False
from ptfactory.filters.verify.constraints import ConstraintsVerifier
row = {"kind": "sft", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "a note. two"}],
       "reference": {"constraints": json.dumps(%s)}}
verdict = ConstraintsVerifier().verify(row)
print(json.dumps({"attempts": [str(a) for a in attempts], "verdict": verdict.verdict,
                  "modules": "if_verifiable.ifeval.instructions" in sys.modules}))
"""


def test_importing_and_running_the_checks_needs_no_network(tmp_path: Path) -> None:
    every = [
        *SPECS,
        {"type": "number_sentences", "relation": "at least", "num_sentences": 1},
        {"type": "capital_word_frequency", "capital_frequency": 1, "capital_relation": "less than"},
        {"type": "language:response_language", "language": "en"},
    ]
    env = {
        **os.environ,
        "NLTK_DATA": str(tmp_path / "nltk_data"),  # fresh and empty
        "HOME": str(tmp_path),  # no ~/nltk_data either
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE % json.dumps(every)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["modules"]  # the IFEval code was imported and ran
    assert report["attempts"] == []  # no download tried, no socket opened
    assert report["verdict"] == "fail"  # decided by the checks that run offline
    assert not (tmp_path / "nltk_data").exists()
