"""Agent episodes: the episode pool (one warm container per episode, state kept across steps)
against one fresh container per step (the workspace carried in and out as a tar), and the engine's
share of a model-driven rollout's wall time.

    python bench/agent.py [--repeats 3] [--workers 2] [--engine-rollouts 2 --engine-steps 2]

Work: the demo tasks' reference solutions (demo/agent/tasks.jsonl), every call then the task's
check, the same calls in both modes, episodes in parallel up to --workers in both. Same isolation
and limits (no network, read-only root, tmpfs workspace, uid nobody, caps dropped, memory/pids/CPU).
Prints steps/s and episodes/min (median of --repeats) and their ratio; then, unless
--engine-rollouts 0, rolls the tasks out with the bundled SmolLM2 and prints the engine's share.
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.filters.execution.docker_sandbox import DockerSandbox, docker_client
from ptfactory.filters.execution.episode import EpisodePool
from ptfactory.filters.execution.image import find_image
from ptfactory.filters.execution.limits import Limits
from ptfactory.generators.agent.tasks import AgentTask, read_tasks
from ptfactory.generators.agent.tools import execute_call

LIMITS = Limits(timeout_s=10, memory_mb=256, pids=64, cpus=1.0)
TASKS = read_tasks(Path(__file__).resolve().parent.parent / "demo" / "agent" / "tasks.jsonl")


def pool_episode(pool: EpisodePool, task: AgentTask) -> tuple[int, bool]:
    with pool.open(task.files) as episode:
        for call in task.solution or []:
            execute_call(episode, task, call["name"], call["arguments"])
        return len(task.solution or []) + 1, episode.run_check(task.check).status == "passed"


def run_pool(workers: int) -> tuple[float, int, int]:
    start = time.perf_counter()  # the pool's start counts: it is part of a batch's cost
    pool = EpisodePool(DockerSandbox(LIMITS, workers=workers))
    try:
        with ThreadPoolExecutor(workers) as threads:
            done = list(threads.map(lambda t: pool_episode(pool, t), TASKS))
    finally:
        pool.close()
    return time.perf_counter() - start, sum(s for s, _ in done), sum(ok for _, ok in done)


def _tar(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.uid, info.gid, info.mode = len(data), 65534, 65534, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


_UNPACK = "import base64, io, sys, tarfile; tarfile.open(fileobj=io.BytesIO(base64.b64decode(sys.argv[1]))).extractall('/work')"


def _untar(chunks: Any) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r") as tar:
        return {
            m.name.removeprefix("./"): tar.extractfile(m).read().decode()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile() and "__pycache__" not in m.name
        }


def cold_step(client: Any, image: Any, files: dict[str, str], argv: list[str]) -> tuple[dict[str, str], int]:
    """One step in a fresh container: the workspace in, the step, the workspace out."""
    memory = f"{LIMITS.memory_mb}m"
    container = client.containers.run(
        image,
        ["sleep", str(LIMITS.timeout_s * 3)],
        detach=True,
        network_mode="none",
        read_only=True,
        tmpfs={"/work": "rw,noexec,nosuid,nodev,size=64m,uid=65534,gid=65534"},
        mem_limit=memory,
        memswap_limit=memory,
        pids_limit=LIMITS.pids,
        nano_cpus=int(LIMITS.cpus * 1e9),
        user="65534:65534",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        working_dir="/work",
    )
    try:
        # the root is read-only, so no `docker cp`: the tar goes in as an argument, out on stdout
        container.exec_run(
            ["python3", "-c", _UNPACK, base64.b64encode(_tar(files)).decode()], workdir="/work"
        )
        result = container.exec_run(["timeout", "-s", "KILL", str(LIMITS.timeout_s), *argv], workdir="/work")
        packed = container.exec_run(["tar", "-C", "/work", "-cf", "-", "."], demux=True).output[0]
        return _untar([packed]), result.exit_code
    finally:
        container.remove(force=True)


def cold_episode(client: Any, image: Any, task: AgentTask) -> tuple[int, bool]:
    files = dict(task.files)
    for call in task.solution or []:
        arguments = call["arguments"]
        if call["name"] == "write_file":
            files[arguments["path"]] = arguments["content"]
            files, _ = cold_step(client, image, files, ["true"])
            continue
        argv = {
            "bash": lambda a: ["bash", "-c", a["command"]],
            "read_file": lambda a: ["head", "-c", "16000", "--", a["path"]],
            "run_tests": lambda _: ["bash", "-c", task.check],
        }[call["name"]](arguments)
        files, _ = cold_step(client, image, files, argv)
    _, code = cold_step(client, image, files, ["bash", "-c", task.check])
    return len(task.solution or []) + 1, code == 0


def run_cold(workers: int) -> tuple[float, int, int]:
    client = docker_client()
    image = find_image(client)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        done = list(threads.map(lambda t: cold_episode(client, image, t), TASKS))
    return time.perf_counter() - start, sum(s for s, _ in done), sum(ok for _, ok in done)


def engine_share(rollouts: int, steps: int, workers: int) -> None:
    from ptfactory.engines.base import SamplingParams
    from ptfactory.engines.bundled import bundled_model_dir
    from ptfactory.engines.transformers_engine import TransformersEngine
    from ptfactory.generators.agent.rollout import RolloutConfig, run_rollouts

    engine = TransformersEngine(model_id="SmolLM2-135M-Instruct", model_path=str(bundled_model_dir()))
    engine.chat([[{"role": "user", "content": "hi"}]], SamplingParams(max_tokens=1))  # loads the model
    engine.stats.seconds = 0.0  # the model's load is not a step's cost
    pool = EpisodePool(DockerSandbox(LIMITS, workers=workers))
    start = time.perf_counter()
    try:
        rows = run_rollouts(
            TASKS, engine, pool, RolloutConfig(rollouts=rollouts, max_steps=steps, max_tokens=64)
        )
    finally:
        pool.close()
    wall = time.perf_counter() - start
    n_steps = sum(r["outcome"]["n_steps"] for r in rows)
    sandbox = sum(r["outcome"]["sandbox_s"] for r in rows)
    print(
        f"\nSmolLM2 rollouts ({len(rows)} episodes, {n_steps} steps, max 64 tokens a reply): wall {wall:.1f}s, "
        f"engine {engine.stats.seconds:.1f}s ({engine.stats.seconds / wall:.0%} of wall), sandbox "
        f"{sandbox:.1f}s summed over episodes; {n_steps / wall:.2f} steps/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--engine-rollouts", type=int, default=2, help="0: skip the engine-share run")
    parser.add_argument("--engine-steps", type=int, default=2)
    args = parser.parse_args()
    pool_rates, cold_rates, episodes_pool, episodes_cold = [], [], [], []
    for rep in range(args.repeats):
        seconds, steps, solved = run_pool(args.workers)
        cold_seconds, cold_steps, cold_solved = run_cold(args.workers)
        pool_rates.append(steps / seconds)
        cold_rates.append(cold_steps / cold_seconds)
        episodes_pool.append(len(TASKS) / seconds * 60)
        episodes_cold.append(len(TASKS) / cold_seconds * 60)
        print(
            f"  repeat {rep + 1}: pool {steps} steps in {seconds:.1f}s ({solved} solved); "
            f"fresh container per step {cold_steps} steps in {cold_seconds:.1f}s ({cold_solved} solved)",
            flush=True,
        )
    pool, cold = statistics.median(pool_rates), statistics.median(cold_rates)
    print(f"\n{len(TASKS)} demo tasks' reference solutions, {args.workers} workers, median of {args.repeats}")
    print("| mode | steps/s | episodes/min |")
    print("|---|---|---|")
    print(
        f"| episode pool (warm container per episode) | {pool:.2f} | {statistics.median(episodes_pool):.1f} |"
    )
    print(f"| fresh container per step | {cold:.2f} | {statistics.median(episodes_cold):.1f} |")
    print(f"ratio {pool / cold:.1f}x")
    if args.engine_rollouts:
        engine_share(args.engine_rollouts, args.engine_steps, args.workers)


if __name__ == "__main__":
    main()
