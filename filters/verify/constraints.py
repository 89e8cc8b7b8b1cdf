"""The constraints verifier: verifiable instruction-following checks (IFEval's) on a response.

A seed states its constraints as specs (the seed field ``constraints``; stored as canonical JSON
in ``reference.constraints``)::

    "constraints": [{"type": "length_constraints:number_words", "relation": "less than", "num_words": 100},
                    {"type": "no_comma"},
                    {"type": "keywords:existence", "keywords": ["budget", "risk"]}]

``type`` is an IFEval instruction id, with or without its group (``number_words`` is
``length_constraints:number_words``); the other keys are that check's arguments, all of them
required (IFEval draws a missing one at random: a spec must say what it checks). The checks are
Google's IFEval code as packaged by ``if-verifiable`` (``if_verifiable.ifeval``; Apache-2.0), plus
``startend:starts_with`` (``start_phrase``), which IFEval lacks. The response is checked as written
(IFEval's *strict* mode; a ``<think>`` block is dropped first).

============================================  ==============================================
type                                          arguments
============================================  ==============================================
length_constraints:number_words               relation ("less than" | "at least"), num_words
length_constraints:number_sentences  (*)      relation, num_sentences
length_constraints:number_paragraphs          num_paragraphs (paragraphs split by ``***``)
length_constraints:nth_paragraph_first_word   num_paragraphs, nth_paragraph, first_word
keywords:existence / keywords:forbidden_words keywords / forbidden_words (lists)
keywords:frequency                            keyword, frequency, relation
keywords:letter_frequency                     letter, let_frequency, let_relation
detectable_format:number_bullet_lists         num_bullets
detectable_format:multiple_sections           section_spliter, num_sections
detectable_format:number_highlighted_sections num_highlights
detectable_format:title / json_format / constrained_response   (none)
detectable_content:number_placeholders        num_placeholders
detectable_content:postscript                 postscript_marker
change_case:english_lowercase / english_capital                (none)
change_case:capital_word_frequency   (*)      capital_frequency, capital_relation
punctuation:no_comma, startend:quotation, combination:two_responses   (none)
startend:end_checker / startend:starts_with   end_phrase / start_phrase
combination:repeat_prompt                     prompt_to_repeat
language:response_language                    language (ISO 639-1; langdetect, offline)
============================================  ==============================================

(*) Unavailable offline: ``number_sentences`` and ``capital_word_frequency`` need NLTK's
``punkt``/``punkt_tab`` tokenizer data, which no PyPI package ships and nothing here downloads.
Where that data is absent (every machine of this project) a row with such a spec abstains
(``check_unavailable``) unless another check already failed; where a user installed it, they run.
Importing this module and running the checks fetches nothing: tests/filters/verify/
test_verify_constraints.py imports and runs them in a subprocess with a fresh, empty NLTK_DATA
and records every download attempt and socket.

Verdicts: every check holds -> pass; any check fails -> fail (``partial`` = the share that held);
otherwise (only unavailable checks left undecided) -> abstain; a reply that is only an unclosed
``<think>`` block -> no_answer. Evidence: each check's type,
arguments and result, and the names of the failed ones.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ptfactory.filters.verify.base import Verdict, Verifier, reference_of

__all__ = ["OFFLINE_UNAVAILABLE", "ConstraintsVerifier", "check_constraint", "constraint_problem"]

OFFLINE_UNAVAILABLE = ("length_constraints:number_sentences", "change_case:capital_word_frequency")
STARTS_WITH = "startend:starts_with"


@functools.cache
def _registry() -> dict[str, Any]:
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT
    from langdetect import DetectorFactory

    # langdetect draws from an unseeded generator: the same reply could pass and then fail
    DetectorFactory.seed = 0
    return dict(INSTRUCTION_DICT)


# Each argument's shape. IFEval draws a random value for a negative number, an empty list or a
# letter that is not one ASCII letter, and iterates a string given for a list: such a spec would
# check something nobody asked for, so it is refused with the argument's name.
_COUNTS = frozenset(
    {"num_sentences", "num_placeholders", "num_bullets", "num_highlights", "num_sections", "num_paragraphs",
     "frequency", "num_words", "let_frequency", "capital_frequency"}
)  # fmt: skip
_WORD_LISTS = frozenset({"keywords", "forbidden_words"})
_REGEX_ARGS = frozenset({"keyword", "keywords"})  # IFEval searches these as regular expressions


def _argument_problem(name: str, value: Any) -> str | None:
    if name in _COUNTS or name == "nth_paragraph":
        least = 1 if name == "nth_paragraph" else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"{name} must be a whole number >= {least}, got {value!r}"
    elif name in _WORD_LISTS:
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(w, str) and w.strip() for w in value)
        ):
            return f"{name} must be a non-empty list of words, got {value!r} (a single word: [{value!r}])"
    elif name == "letter":
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z]", value):
            return f"letter must be one ASCII letter, got {value!r}"
    elif not isinstance(value, str) or not value.strip():
        return f"{name} must be non-empty text, got {value!r}"
    return None


def _resolve(kind: str) -> str | None:
    if kind in (STARTS_WITH, "starts_with"):
        return STARTS_WITH
    if kind in _registry():
        return kind
    matches = [full for full in _registry() if full.split(":", 1)[1] == kind]
    return matches[0] if len(matches) == 1 else None


def _known() -> list[str]:
    return sorted([*_registry(), STARTS_WITH])


class _StartsWith:
    """``startend:starts_with``: the response's first non-blank text is ``start_phrase`` (case-insensitive)."""

    def __init__(self, start_phrase: str) -> None:
        if not isinstance(start_phrase, str) or not start_phrase.strip():
            raise ValueError("start_phrase must be non-empty text")
        self.phrase = start_phrase.strip().lower()

    def check_following(self, value: str) -> bool:
        text = value.strip().lower()
        after = text[len(self.phrase) : len(self.phrase) + 1]
        # "Dear team" does not start "Dear teammates": a phrase ending in a letter ends a word
        return text.startswith(self.phrase) and not (self.phrase[-1].isalnum() and after.isalnum())


class _ForbiddenWords:
    """``keywords:forbidden_words`` as IFEval checks it (whole words, any case), with the words taken
    literally: IFEval puts ``\\b`` around each word as a regular expression, so "C++" or "$5" never
    matched where they stand."""

    def __init__(self, forbidden_words: list[str]) -> None:
        self.patterns = [
            re.compile(rf"(?<!\w){re.escape(w.strip())}(?!\w)", re.IGNORECASE) for w in forbidden_words
        ]

    def check_following(self, value: str) -> bool:
        return not any(p.search(value) for p in self.patterns)


def _build(spec: Mapping[str, Any]) -> tuple[str, Any]:
    """(the check's full id, a built checker); raises ValueError with a sentence."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
        raise ValueError('a constraint is an object with a "type" naming its check')
    kind = _resolve(spec["type"])
    if kind is None:
        raise ValueError(f"unknown constraint type {spec['type']!r}; known: {', '.join(_known())}")
    kwargs = {k: v for k, v in spec.items() if k != "type"}
    if kind == STARTS_WITH:
        if set(kwargs) != {"start_phrase"}:
            raise ValueError(f"{kind} takes exactly start_phrase, got {sorted(kwargs) or 'none'}")
        return kind, _StartsWith(kwargs["start_phrase"])
    checker = _registry()[kind](kind)
    needed = checker.get_instruction_args_keys()
    missing = [k for k in needed if kwargs.get(k) is None]
    extra = [k for k in kwargs if k not in needed]
    if missing or extra:
        wrong = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}"
        raise ValueError(f"{kind}: {wrong}; its arguments: {', '.join(needed) or 'none'}")
    for name, value in kwargs.items():
        if problem := _argument_problem(name, value):
            raise ValueError(f"{kind}: {problem}")
    if kwargs.get("nth_paragraph", 0) > kwargs.get("num_paragraphs", 0) >= 1:
        raise ValueError(f"{kind}: nth_paragraph {kwargs['nth_paragraph']} is past num_paragraphs")
    if kind == "keywords:forbidden_words":
        return kind, _ForbiddenWords(kwargs["forbidden_words"])
    # IFEval searches keywords as regular expressions: "C++" would match any c, "$5" nothing
    kwargs = {k: ([re.escape(w) for w in v] if isinstance(v, list) else re.escape(v)) if k in _REGEX_ARGS else v
              for k, v in kwargs.items()}  # fmt: skip
    try:
        checker.build_description(**kwargs)
    except Exception as exc:  # IFEval validates with asserts and ValueErrors
        raise ValueError(f"{kind}: bad arguments {kwargs} ({type(exc).__name__}: {exc})") from None
    return kind, checker


def constraint_problem(specs: Any) -> str | None:
    """None if ``specs`` is a valid list of constraint specs, else what is wrong (a sentence)."""
    if not isinstance(specs, list) or not specs:
        return "constraints must be a non-empty list of constraint objects"
    for index, spec in enumerate(specs):
        try:
            kind, checker = _build(spec)
        except ValueError as exc:  # the sentence goes to the user
            return f"constraint {index}: {exc}"
        try:
            if kind not in OFFLINE_UNAVAILABLE:
                checker.check_following("A response. With two sentences")  # arguments of a bad type
        except Exception as exc:
            args = {k: v for k, v in spec.items() if k != "type"}
            return f"constraint {index}: {kind}: bad arguments {args} ({type(exc).__name__}: {exc})"
    return None


def check_constraint(spec: Mapping[str, Any], response: str) -> bool | None:
    """Whether ``response`` meets ``spec``; None when the check cannot run here (NLTK data absent)."""
    _, checker = _build(spec)
    try:
        return bool(response.strip() and checker.check_following(response))
    except LookupError:  # NLTK's tokenizer data is not installed: nothing downloads it
        return None


def _strip_thinking(text: str) -> str:
    from if_verifiable.common import strip_thinking

    stripped: str = strip_thinking(text)
    return stripped


class ConstraintsVerifier(Verifier):
    kind = "constraints"

    def applies(self, row: Mapping[str, Any]) -> bool:
        return bool(reference_of(row).get("constraints"))

    def verify_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        return [self._one(row) for row in rows]

    def _one(self, row: Mapping[str, Any]) -> Verdict:
        if not self.applies(row):
            return self.not_applicable()
        try:
            specs = json.loads(reference_of(row)["constraints"])
        except ValueError as exc:
            return self.abstain("bad_constraints", error=str(exc))
        if problem := constraint_problem(specs):
            return self.abstain("bad_constraints", error=problem)
        response = self.response(row)
        if not response.strip():
            return self.abstain("no_response")
        text = _strip_thinking(response)
        if not text.strip():  # an unclosed <think>: the reply never got to its answer
            return self.verdict("no_answer", "no_answer")
        checks = []
        for spec in specs:
            held = check_constraint(spec, text)
            checks.append(
                {
                    "type": _resolve(spec["type"]),
                    "args": {k: v for k, v in spec.items() if k != "type"},
                    "held": held,
                }
            )
        failed = [c["type"] for c in checks if c["held"] is False]
        unavailable = [c["type"] for c in checks if c["held"] is None]
        share = sum(1 for c in checks if c["held"]) / len(checks)
        evidence = {"checks": checks, "failed": failed, "unavailable": unavailable}
        if failed:
            return self.verdict("fail", "constraint_failed", partial=share, **evidence)
        if unavailable:
            return self.abstain("check_unavailable", **evidence)
        return self.verdict("pass", "constraints_met", partial=1.0, **evidence)
