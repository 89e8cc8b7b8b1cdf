"""The sample record's Arrow types: one schema every stage reads and writes (DESIGN.md).

Schema 3 (``sample/3``) makes rows verifiable: a top-level ``reference`` (what a verifier checks a
response against: the reference ``answer`` and its ``source``, a procedural task's ``family`` and
generator ``metadata`` as JSON, IFEval-style ``constraints`` as JSON; null on rows with none, e.g.
rows derived by self-instruct or evol-instruct), ``scores.verifiers`` (one element per verifier
that applied: its name, kind, verdict, reason, score, partial credit, whether the verdict is final,
and its evidence as canonical JSON; see :mod:`ptfactory.filters.verify`), ``scores.judge_votes``
(the independent votes that counted on the row's batch: what the two-vote rule of routing reads;
:mod:`ptfactory.annotators.judges.panel`), and kind ``rl``
(verifiable prompts for reinforcement learning). A schema-2 table is a schema-3 table with those
fields null: :func:`~ptfactory.storage.schema.checks.conform` lifts it, the ``sample_id`` of each row unchanged
(neither new field is content: a reference labels a row, it does not change what the row says).

Schema 2 (``sample/2``) adds agent trajectories to schema 1 (``sample/1``): a message may carry
assistant ``tool_calls`` (OpenAI form: id, type, function name and JSON ``arguments``) or be a
``tool`` message answering one (``tool_call_id``, ``name``); new columns ``tools`` (the JSON-schema
tool specs offered, as canonical JSON), ``steps`` (per step: the call, exit code, duration, output
tail, workspace hash, tokens, reward), ``outcome`` (solved, steps, wall time, sandbox seconds, the
task and policy replay needs) and ``step_labels`` (an expert's label per step: step index, label,
annotator). Kind ``agent`` joins. A schema-1 table is a schema-2 table with those fields null:
:func:`~ptfactory.storage.schema.checks.conform` lifts it, and its ``sample_id``s are unchanged.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "AGENT_COLUMNS",
    "ANNOTATION",
    "DECISION",
    "DEDUP",
    "DIFFICULTY",
    "EXECUTION",
    "JUDGE_VOTE",
    "KINDS",
    "MESSAGE",
    "MESSAGES",
    "MESSAGE_V1",
    "OUTCOME",
    "PROVENANCE",
    "REFERENCE",
    "ROLES",
    "SAMPLE_SCHEMA",
    "SCHEMA_VERSION",
    "SCORES",
    "STEP",
    "STEP_LABEL",
    "TOOL_CALL",
    "VERDICTS",
    "VERIFIER_OUTCOMES",
    "VERIFIER_VOTE",
]

SCHEMA_VERSION = 3
KINDS = ("sft", "preference", "code", "agent", "rl")
ROLES = ("system", "user", "assistant", "tool")
# keep/drop end a row's fate at a stage; route/accept/reject belong to review.
VERDICTS = ("keep", "drop", "route", "accept", "reject", "wait", "edit")
# a verifier's verdict on a row (filters/verify/base.py: OUTCOMES)
VERIFIER_OUTCOMES = ("pass", "fail", "partial", "no_answer", "abstain")

MESSAGE_V1 = pa.struct([("role", pa.string()), ("content", pa.string())])
TOOL_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),  # "function"
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),  # arguments: JSON
    ]
)
# role and content as in schema 1 (content "" on an assistant turn that only calls tools); the
# rest null on plain turns
MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
MESSAGES = pa.list_(MESSAGE)

PROVENANCE = pa.struct(
    [
        ("method", pa.string()),
        ("template_id", pa.string()),
        ("template_hash", pa.string()),
        ("engine", pa.string()),
        ("model", pa.string()),
        ("sampling_params", pa.string()),  # canonical JSON: a struct would fix the keys per engine
        ("seed_task_id", pa.string()),
        ("parent_id", pa.string()),
        ("code_version", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("finish_reason", pa.string()),  # the engine's: "length" means max_tokens cut the response
    ]
)

DEDUP = pa.struct(
    [
        ("cluster_id", pa.int64()),
        ("representative_id", pa.string()),
        ("is_representative", pa.bool_()),
        ("jaccard", pa.float64()),
    ]
)
EXECUTION = pa.struct(
    [
        ("status", pa.string()),
        ("exit_code", pa.int32()),
        ("duration_ms", pa.float64()),
        ("stdout_tail", pa.string()),
        ("stderr_tail", pa.string()),
        ("assertions_passed", pa.int32()),  # graded execution: asserts of the tests that held
        ("assertions_total", pa.int32()),
    ]
)
DIFFICULTY = pa.struct([("method", pa.string()), ("value", pa.float64()), ("detail", pa.string())])
JUDGE_VOTE = pa.struct(
    [
        ("judge", pa.string()),
        ("model", pa.string()),
        ("score", pa.float64()),  # null when the reply did not parse
        ("verdict", pa.string()),
        ("rationale", pa.string()),
        ("raw", pa.string()),
        ("parsed", pa.bool_()),
        ("method", pa.string()),  # json | probability | embedding | execution | unparsed
        ("confidence", pa.float64()),  # 0-1: 1 - normalised entropy of a probability vote
        # schema 3: the judge's identity key (model, engine, method, prompt): calibration fits a
        # judge only on votes of its current identity (annotators/judges/identity.py)
        ("identity", pa.string()),
    ]
)
VERIFIER_VOTE = pa.struct(
    [
        ("verifier", pa.string()),  # its name in the panel
        ("kind", pa.string()),  # code | answer | procedural | constraints | agent
        ("verdict", pa.string()),  # pass | fail | partial | no_answer | abstain
        ("reason", pa.string()),  # snake_case: tests_passed, wrong_answer, math_verify_timeout...
        ("score", pa.float64()),  # 1 pass, 0 fail/partial/no_answer, null abstain
        ("partial", pa.float64()),  # part credit 0-1 (assertions, constraints held): never a pass
        ("final", pa.bool_()),  # a fail: never auto-accepted, never a `chosen` answer
        ("evidence", pa.string()),  # canonical JSON: extracted vs expected, failed checks, output
    ]
)
SCORES = pa.struct(
    [
        ("dedup", DEDUP),
        ("execution", EXECUTION),
        ("difficulty", DIFFICULTY),
        ("judges", pa.list_(JUDGE_VOTE)),
        ("judge_mean", pa.float64()),
        ("judge_median", pa.float64()),
        ("judge_spread", pa.float64()),
        ("judge_confidence", pa.float64()),  # mean confidence of the counted LLM votes
        ("verifiers", pa.list_(VERIFIER_VOTE)),  # schema 3
        # schema 3: independent votes that counted on the batch (weight > 0, not constant; one per
        # judge family and method, one per verifier evidence): auto-accept needs two
        ("judge_votes", pa.int32()),
    ]
)
REFERENCE = pa.struct(
    [
        ("answer", pa.string()),  # the reference's final answer (extracted), or a procedural oracle's
        ("source", pa.string()),  # answer | response | procedural | column:<name>
        ("family", pa.string()),  # a procedural task's reasoning-gym dataset
        ("metadata", pa.string()),  # canonical JSON: the generator's metadata, intact (its scorer reads it)
        ("constraints", pa.string()),  # canonical JSON: the constraint specs (filters/verify/constraints.py)
    ]
)
# The clean-data stages' decisions (docs/clean-data.md), their detail canonical JSON:
# - privacy: keep/redacted, drop/personal_data, route/personal_data or route/redaction_breaks_code,
#   detail {"<TYPE>": count, ...} (types and counts, never a value);
# - semantic_dedup: drop/semantic_duplicate {"of": <kept sample id>, "similarity": s[, "published": true]},
#   keep/semantic_representative {"merged": n};
# - decontaminate: drop/contaminated {"benchmark", "item", "ngram", "shared"}, keep/clean.
DECISION = pa.struct(
    [
        ("stage", pa.string()),
        ("verdict", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)
ANNOTATION = pa.struct(
    [
        ("project_id", pa.int64()),
        ("task_id", pa.int64()),
        ("annotation_id", pa.int64()),
        ("annotator", pa.string()),
        ("verdict", pa.string()),
        ("rating", pa.int64()),
        ("edited_response", pa.string()),
        ("preference", pa.string()),
        ("lead_time_s", pa.float64()),
    ]
)

STEP = pa.struct(
    [
        ("index", pa.int32()),
        ("kind", pa.string()),  # tool | final | unparsable | invalid | policy_violation | check
        ("name", pa.string()),
        ("arguments", pa.string()),  # JSON
        ("status", pa.string()),
        ("exit_code", pa.int32()),
        ("duration_ms", pa.float64()),
        ("output_tail", pa.string()),
        ("tree_hash", pa.string()),  # the workspace's hash after the step
        ("error", pa.string()),
        ("checked", pa.bool_()),  # the task's check ran after this step
        ("check_exit", pa.int32()),
        ("check_hash", pa.string()),
        ("tests_passed", pa.int32()),
        ("tests_total", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("finish_reason", pa.string()),  # the engine's: "length" marks a reply cut at max_tokens
        ("reward", pa.float64()),
    ]
)
OUTCOME = pa.struct(
    [
        ("task_id", pa.string()),
        ("rollout", pa.int32()),
        ("solved", pa.bool_()),
        ("stop_reason", pa.string()),  # final_answer | check_passed | max_steps | time_limit | sandbox_gone
        ("n_steps", pa.int32()),
        ("wall_s", pa.float64()),
        ("sandbox_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("parse_rate", pa.float64()),  # steps whose reply parsed / steps
        ("violations", pa.int32()),
        ("reward", pa.float64()),
        ("initial_hash", pa.string()),
        ("initial_check", STEP),
        ("task", pa.string()),  # the whole task as JSON (workspace included): replay needs nothing else
        ("policy", pa.string()),  # the command policy as JSON {mode, rules}: replay refuses alike
    ]
)
STEP_LABEL = pa.struct(
    [
        ("step", pa.int32()),  # index into ``steps``
        ("label", pa.string()),  # e.g. first_error | ok
        ("annotator", pa.string()),
    ]
)
AGENT_COLUMNS = ("tools", "steps", "outcome", "step_labels")

SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("batch", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("messages", MESSAGES, nullable=False),
        pa.field("chosen", MESSAGES),
        pa.field("rejected", MESSAGES),
        pa.field("tests", pa.string()),
        pa.field("entry_point", pa.string()),
        pa.field("language", pa.string()),
        pa.field("provenance", PROVENANCE),
        pa.field("scores", SCORES),
        pa.field("decisions", pa.list_(DECISION), nullable=False),
        pa.field("annotation", ANNOTATION),
        pa.field("tools", pa.string()),  # canonical JSON list of tool specs (agent rows)
        pa.field("steps", pa.list_(STEP)),
        pa.field("outcome", OUTCOME),
        pa.field("step_labels", pa.list_(STEP_LABEL)),
        pa.field("reference", REFERENCE),  # schema 3
    ],
    metadata={"ptfactory.schema": f"sample/{SCHEMA_VERSION}"},
)
