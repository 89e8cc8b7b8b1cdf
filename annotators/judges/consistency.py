"""How rows without a reference are gated: the two-vote rule, and the generator's self-consistency.

Rows derived from a seed (self-instruct, evol-instruct) carry no reference: their task is not the
seed's, so no verifier decides them. They are gated by

1. **the two-vote rule**: only judges that earned a weight on the batch can accept or reject them,
   and only with two independent counted votes (annotators/routing.py); otherwise they go to
   review (``routing.silent``);
2. **self-consistency**: where the generator sampled two or more answers to one such instruction
   (``provenance.parent_id``) and they *mark* different final answers (``#### 18``, ``\\boxed{18}``,
   "the answer is 18": :func:`~ptfactory.filters.verify.extract` with its fallbacks off, so free
   text never counts as an answer), at least one of them is wrong and none is auto-accepted: each
   gets the verdict ``partial`` (reason ``samples_disagree``; ``partial``: the share of the
   instruction's samples that mark its answer), which routing sends to review. Samples that agree
   prove nothing (a model repeats its mistakes): agreement is recorded as an abstention
   (``samples_agree``) and accepts nothing by itself.

The check is a member of the panel's verifiers (kind ``consistency``); its verdicts have no score
and never enter the mean.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ptfactory.filters.verify import Verdict, Verifier, extract

__all__ = ["ConsistencyCheck"]


class ConsistencyCheck(Verifier):
    """Applies to rows with a response, no reference and a parent instruction; decides over the
    rows of one call (a batch), grouped by ``provenance.parent_id``."""

    kind = "consistency"

    def applies(self, row: Mapping[str, Any]) -> bool:
        parent = (row.get("provenance") or {}).get("parent_id")
        return not row.get("reference") and bool(parent) and row.get("kind") in ("sft", "rl")

    def verify_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        answers: list[str | None] = []
        groups: dict[str, list[int]] = defaultdict(list)
        for i, row in enumerate(rows):
            found = extract(self.response(row), fallback=False) if self.applies(row) else None
            answers.append(found.answer if found else None)
            if found is not None:
                groups[str((row.get("provenance") or {}).get("parent_id"))].append(i)
        out = [self.not_applicable() for _ in rows]  # no marked answer: nothing to compare
        for members in groups.values():
            if len(members) < 2:
                for i in members:
                    out[i] = self.abstain("one_sample", answer=answers[i])
                continue
            said = [answers[i] for i in members]
            distinct = sorted({a for a in said if a is not None})
            for i in members:
                evidence = {"answer": answers[i], "answers": said, "samples": len(members)}
                if len(distinct) == 1:
                    out[i] = self.abstain("samples_agree", **evidence)
                else:
                    share = said.count(answers[i]) / len(said)
                    out[i] = self.verdict("partial", "samples_disagree", partial=round(share, 4), **evidence)
        return out
