"""Does curated data train a better model? Verifier-gated SFT against ungated SFT from one pool.

    python bench/curation_gain.py [--quick] [--family word_sequence_reversal] [--seeds 0,1,2]

One reasoning-gym family (default: ``word_sequence_reversal`` with two words, chosen by the pilot
below), on the bundled SmolLM2-135M-Instruct, on CPU:

1. **Pool.** The generator (the bundled model through the factory's engine, 5-shot: five solved
   instances as earlier chat turns) answers ``--pool`` questions ``--samples`` times each. Each
   candidate row is the question as the task states it (zero-shot, asking for ``<answer>`` tags)
   and the generator's reply: no reference answer is trained on in either arm.
2. **Gate.** The procedural verifier (reasoning-gym's scorer) passes or fails each candidate.
3. **Arms.** *curated*: N rows drawn from the candidates the gate passed; *uncurated*: N rows drawn
   from all candidates (same N, same draw seed). Both published as sft versions.
4. **Train.** ``ptf train sft``'s library on each arm: same steps, hyper-parameters and training
   seed, three training seeds.
5. **Evaluate.** ``ptf eval CHECKPOINT --tasks heldout.jsonl`` (the CLI, greedy) on ``--heldout``
   new instances, exact-deduplicated against both arms' questions; the base model too.
   Accuracy per arm: each task's success averaged over the seeds; 95 % intervals by the
   percentile bootstrap over tasks (2,000 resamples).
6. **GRPO.** ``ptf train grpo`` from the uncurated (``--grpo-from``; seed 0) checkpoint, whose pass
   rate is in (0, 1) (the base model's is 0 zero-shot on every family tried), on an rl version of
   fresh instances: the mean reward per step, and ``ptf eval`` before and after.
   ``--only-grpo --workdir W`` reruns this step on a finished run's folder.

Pilot (bundled model, zero-shot as tasks ask, greedy or T=0.7-0.8, 12-40 questions; loaded 2-core
box): pass rate 0.00 on chain_sum, basic_arithmetic, letter_counting, gcd, lcm, count_bits,
spell_backward, products, simple_equations, word_sequence_reversal, coin_flip, number_sorting,
base_conversion, power_function, decimal_arithmetic, family_relationships; syllogism 0.08 (a Yes/No
guess); with the easiest configs chain_sum / products 0.02, leg_counting 0.03. 5-shot generation
lifts word_sequence_reversal (2 words) to 0.28 (2-3 words: 0.12; inline examples in one turn:
0.00), where its failures mostly copy the words in order: a gate has something to separate.
Arithmetic families stay at 0.03 even 5-shot (the pool would hold almost no passing rows).

Measured 2026-12-06 (defaults: pool 120 x 3, 64 rows per arm, 32 full-weight SFT steps at batch 4,
lr 1e-4, 80 held-out tasks; the 2-core Intel box, idle), 1,508 s with GRPO (on 2026-12-05, on a box
shared with other helpers, load 0.9-5.0: 2,746 s, the same figures): pool 360 candidates, 90
passing (0.25); the uncurated arm held 14 passing rows of 64.

    model         accuracy            95% CI   per seed
    base             0.000 [0.000, 0.000]
    curated          0.946 [0.900, 0.983]   0.950, 0.950, 0.938
    uncurated        0.304 [0.221, 0.392]   0.237, 0.350, 0.325

GRPO (``--only-grpo``, 12 steps of one prompt x 4 completions, lr 5e-5) from uncurated seed 0:
held-out 0.237 [0.150, 0.338] -> 0.312 [0.212, 0.412] (overlapping: 12 prompts is a short run);
from curated seed 0 (8 steps, lr 2e-5): 0.950 -> 0.963, its groups mostly all-correct (no signal).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("PTF_MODELS_DIR", str(REPO / ".ptf" / "test-state" / "models"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CONFIGS = {"word_sequence_reversal": {"min_words": 2, "max_words": 2}}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", default="word_sequence_reversal")
    parser.add_argument("--config", default=None, help="the family's reasoning-gym config as JSON")
    parser.add_argument("--pool", type=int, default=120, help="questions the generator answers")
    parser.add_argument("--samples", type=int, default=3, help="answers per pool question")
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--arm-rows", type=int, default=64, help="rows per arm (at most the passing ones)")
    parser.add_argument("--heldout", type=int, default=80)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--train-layers", type=int, default=0, help="train only the last N layers (0: all)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--grpo-steps", type=int, default=12)
    parser.add_argument("--grpo-lr", type=float, default=5e-5)
    parser.add_argument(
        "--grpo-from", choices=["uncurated", "curated"], default="uncurated",
        help="the checkpoint GRPO starts from (seed: the first of --seeds)",
    )  # fmt: skip
    parser.add_argument(
        "--only-grpo", action="store_true", help="reuse --workdir's pool, arms and evals; run GRPO"
    )
    parser.add_argument("--grpo-prompts", type=int, default=16)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a fresh temp folder")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny pool, 4 steps, 1 seed")
    args = parser.parse_args()
    if args.quick:
        args.pool, args.samples, args.arm_rows, args.heldout = 16, 2, 8, 12
        args.steps, args.seeds, args.grpo_steps, args.grpo_prompts = 4, "0", 2, 8
    return args


def _instances(family: str, config: dict[str, Any], count: int, seed: int) -> list[dict[str, Any]]:
    import reasoning_gym

    from ptfactory.generators.procedural import ANSWER_FORMAT

    data = reasoning_gym.create_dataset(family, seed=seed, size=count * 3, **config)
    out, seen = [], set()
    for index in range(count * 3):
        entry = data[index]
        if entry["question"] in seen:
            continue
        seen.add(entry["question"])
        instruction = f"{entry['question'].rstrip()}\n\n{ANSWER_FORMAT}"
        out.append(
            {
                "id": f"{family}-{seed}-{index}",
                "instruction": instruction,
                "answer": entry["answer"],
                "metadata": entry["metadata"],
            }
        )
        if len(out) == count:
            break
    return out


def _reference(task: dict[str, Any]) -> dict[str, Any] | None:
    from ptfactory.generators.seeds import parse_seed

    return parse_seed(task["id"], task).reference()


def _pool(
    tasks: list[dict[str, Any]], shots: list[dict[str, Any]], samples: int, cache: Path
) -> list[dict[str, Any]]:
    """The generator's candidates: (question, reply, passed), each reply checked by the gate."""
    from ptfactory.engines.base import SamplingParams
    from ptfactory.engines.spec import EngineSpec, build_engine
    from ptfactory.filters.verify import ProceduralVerifier

    demo = []
    for shot in shots:
        demo += [
            {"role": "user", "content": shot["instruction"]},
            {"role": "assistant", "content": f"<answer>{shot['answer']}</answer>"},
        ]
    import torch

    engine = build_engine(
        EngineSpec(model="bundled", device="cuda" if torch.cuda.is_available() else "cpu"), cache
    )
    params = SamplingParams(n=samples, temperature=0.8, top_p=0.95, max_tokens=20, seed=0)
    replies = engine.chat([[*demo, {"role": "user", "content": t["instruction"]}] for t in tasks], params)
    engine.close()
    rows, owners = [], []
    for task, completions in zip(tasks, replies, strict=True):
        for completion in completions:
            messages = [
                {"role": "user", "content": task["instruction"]},
                {"role": "assistant", "content": completion.text},
            ]
            rows.append({"kind": "sft", "messages": messages, "reference": _reference(task)})
            owners.append(task)
    gate = ProceduralVerifier()
    verdicts = gate.verify_many(rows)
    gate.close()
    return [
        {"messages": r["messages"], "passed": v.passed, "task": t["id"]}
        for r, v, t in zip(rows, verdicts, owners, strict=True)
    ]


def _publish(datasets: Any, name: str, rows: list[dict[str, Any]]) -> None:
    from ptfactory.storage.schema import from_records, sample_id

    records = {}
    for row in rows:
        sid = sample_id("sft", row["messages"])
        records[sid] = {
            "sample_id": sid,
            "batch": name,
            "kind": "sft",
            "messages": row["messages"],
            "decisions": [{"stage": "bench", "verdict": "keep", "reason": name, "detail": None}],
        }
    datasets.publish(name, from_records(records.values()), kind="sft", config_hash="bench", batches=[name])


def _ptf(*args: str, cwd: Path) -> str:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ptfactory", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"ptf {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    print(f"    ptf {args[0]} {args[1]}: {time.perf_counter() - started:.0f} s", flush=True)
    return done.stdout


def _evaluate(model: str, tasks: Path, out: Path, cwd: Path) -> dict[str, float]:
    """``ptf eval``: per held-out task id, 1.0 or 0.0 (greedy, one rollout)."""
    _ptf("eval", model, "--tasks", str(tasks), "--max-tokens", "24", "--out", str(out), cwd=cwd)
    report = json.loads(out.read_text())
    return {r["id"]: float(r["pass_rate"]) for r in report["results"]}


def _interval(per_task: list[float]) -> tuple[float, float, float]:
    from ptfactory.training.eval.metrics import bootstrap

    low, high = bootstrap(per_task, seed=0)
    return sum(per_task) / len(per_task), low, high


def main() -> None:
    args = _args()
    started, load = time.perf_counter(), os.getloadavg()
    config = json.loads(args.config) if args.config else CONFIGS.get(args.family, {})
    work = args.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"curation-gain-{os.getpid()}"
    if not args.only_grpo:
        shutil.rmtree(work, ignore_errors=True)
    (work / ".ptf").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "dagster.yaml", work / "dagster.yaml")
    (work / "factory.yaml").write_text("engines:\n  generator: {model: bundled}\n")
    os.environ["PTF_HOME"] = str(work / ".ptf")
    from ptfactory.storage.versions import DatasetStore
    from ptfactory.training.config import TrainConfig
    from ptfactory.training.run import train

    seeds = [int(s) for s in args.seeds.split(",")]
    if args.only_grpo:
        _only_grpo(args, config, work, seeds[0])
        return
    shots = _instances(args.family, config, args.shots, seed=3_000_000)
    pool_tasks = _instances(args.family, config, args.pool, seed=1_000_000)
    asked = {t["instruction"] for t in pool_tasks + shots}
    # reasoning-gym seeds item i with seed + i: draws whose seeds are far apart share no items
    heldout = [
        t
        for t in _instances(args.family, config, args.heldout * 2, seed=2_000_000)
        if t["instruction"] not in asked
    ]
    heldout = heldout[: args.heldout]
    heldout_file = work / "heldout.jsonl"
    heldout_file.write_text("".join(json.dumps(t) + "\n" for t in heldout))
    print(
        f"{args.family} {config}: pool {len(pool_tasks)} questions x {args.samples}, {len(heldout)} held out",
        flush=True,
    )

    t0 = time.perf_counter()
    candidates = _pool(pool_tasks, shots, args.samples, work / ".ptf" / "responses.sqlite")
    passing = [c for c in candidates if c["passed"]]
    size = min(args.arm_rows, len(passing))
    draw = random.Random(0)
    arms = {"curated": draw.sample(passing, size), "uncurated": draw.sample(candidates, size)}
    print(
        f"pool: {len(candidates)} candidates, {len(passing)} pass the gate ({len(passing) / len(candidates):.2f}); "
        f"{size} rows per arm (uncurated holds {sum(c['passed'] for c in arms['uncurated'])} passing) "
        f"[{time.perf_counter() - t0:.0f} s]",
        flush=True,
    )
    trained_on = {c["messages"][0]["content"] for arm in arms.values() for c in arm}
    assert not trained_on & {t["instruction"] for t in heldout}, "held-out questions leaked into training"
    datasets = DatasetStore(str(work / ".ptf"))
    for name, rows in arms.items():
        _publish(datasets, name, rows)

    scores: dict[str, list[dict[str, float]]] = {"curated": [], "uncurated": []}
    base = _evaluate("bundled", heldout_file, work / "eval-base.json", work)
    checkpoints: dict[tuple[str, int], Path] = {}
    for seed in seeds:
        for name in arms:
            t0 = time.perf_counter()
            output = work / "runs" / f"{name}-{seed}"
            config_train = TrainConfig(
                kind="sft", dataset=f"{name}@v1", model="bundled", output=str(output), max_steps=args.steps,
                learning_rate=args.lr, batch_size=args.batch_size, max_length=256, seed=seed, eval_loss=False,
                train_layers=args.train_layers,
            )  # fmt: skip
            train(config_train, datasets, say=lambda _: None)
            print(
                f"  sft {name} seed {seed}: {args.steps} steps [{time.perf_counter() - t0:.0f} s]", flush=True
            )
            checkpoints[(name, seed)] = output
            scores[name].append(_evaluate(str(output), heldout_file, work / f"eval-{name}-{seed}.json", work))

    ids = [t["id"] for t in heldout]
    print(f"\nheld-out accuracy on {len(ids)} {args.family} tasks (greedy; 95% CI: bootstrap over tasks)")
    print(f"{'model':<12} {'accuracy':>9} {'95% CI':>17}   per seed")
    rows_out = {"base": [base[i] for i in ids]}
    for name in arms:
        rows_out[name] = [sum(s[i] for s in scores[name]) / len(scores[name]) for i in ids]
    intervals = {}
    for name, per_task in rows_out.items():
        mean, low, high = _interval(per_task)
        intervals[name] = (low, high)
        per_seed = (
            "" if name == "base" else ", ".join(f"{sum(s.values()) / len(s):.3f}" for s in scores[name])
        )
        print(f"{name:<12} {mean:>9.3f} [{low:.3f}, {high:.3f}]   {per_seed}")
    apart = intervals["curated"][0] > intervals["uncurated"][1]
    print(f"curated beats uncurated with non-overlapping intervals: {'yes' if apart else 'NO'}")

    start = checkpoints[(args.grpo_from, seeds[0])]
    before = scores[args.grpo_from][0]
    _grpo(args, config, work, datasets, start=start, heldout=heldout_file, before=before, ids=ids)
    print(
        f"\nwall {time.perf_counter() - started:.0f} s; load average at start {load[0]:.1f}, at end {os.getloadavg()[0]:.1f}"
    )


def _only_grpo(args: argparse.Namespace, config: dict[str, Any], work: Path, seed: int) -> None:
    """GRPO and its evals on a finished run's workdir (its held-out tasks and checkpoints)."""
    from ptfactory.storage.versions import DatasetStore

    start = work / "runs" / f"{args.grpo_from}-{seed}"
    report = json.loads((work / f"eval-{args.grpo_from}-{seed}.json").read_text())
    before = {r["id"]: float(r["pass_rate"]) for r in report["results"]}
    heldout = work / "heldout.jsonl"
    ids = [json.loads(line)["id"] for line in heldout.read_text().splitlines()]
    _grpo(
        args,
        config,
        work,
        DatasetStore(str(work / ".ptf")),
        start=start,
        heldout=heldout,
        before=before,
        ids=ids,
    )


def _grpo(
    args: argparse.Namespace, config: dict[str, Any], work: Path, datasets: Any, *, start: Path,
    heldout: Path, before: dict[str, float], ids: list[str],
) -> None:  # fmt: skip
    from ptfactory.storage.schema import from_records, sample_id

    prompts = _instances(args.family, config, args.grpo_prompts, seed=4_000_000)
    held = {json.loads(line)["instruction"] for line in heldout.read_text().splitlines()}
    records = []
    for task in prompts:
        if task["instruction"] in held:
            continue
        messages = [{"role": "user", "content": task["instruction"]}]
        records.append(
            {"sample_id": sample_id("rl", messages), "batch": "grpo", "kind": "rl", "messages": messages,
             "reference": _reference(task), "decisions": [{"stage": "bench", "verdict": "keep", "reason": "rl", "detail": None}]}
        )  # fmt: skip
    datasets.publish("rl", from_records(records), kind="rl", config_hash="bench", batches=["grpo"])
    output = work / "runs" / f"grpo-{args.grpo_from}"
    t0 = time.perf_counter()
    _ptf(
        "train", "grpo", "--dataset", "rl@v1", "--model", str(start), "--output", str(output), "--max-steps",
        str(args.grpo_steps), "--batch-size", "4", "--num-generations", "4", "--max-completion-length", "24",
        "--learning-rate", str(args.grpo_lr), "--temperature", "1.0", "--train-layers", str(args.train_layers), cwd=work,
    )  # fmt: skip
    lineage = json.loads((output / "ptf_lineage.json").read_text())
    print(
        f"\nGRPO from the {start.name} checkpoint, {len(records)} prompts, lr {args.grpo_lr} "
        f"[{time.perf_counter() - t0:.0f} s]"
    )
    for point in lineage["metrics"]["reward_per_step"]:
        parts = ", ".join(f"{k.split('/')[1]} {v:.2f}" for k, v in point.items() if k.startswith("rewards/"))
        print(f"  step {point['step']:>3}  mean reward {point['reward']:.3f}  ({parts})")
    after = _evaluate(str(output), heldout, work / f"eval-grpo-{args.grpo_from}.json", work)
    for label, values in (("before", before), ("after", after)):
        mean, low, high = _interval([values[i] for i in ids])
        print(f"  held-out accuracy {label:<6} {mean:.3f} [{low:.3f}, {high:.3f}]")


if __name__ == "__main__":
    main()
