"""Sandbox benchmark: the warm pool against one cold container per sample, same limits.

    python bench/sandbox.py [--repeats 3] [--cold-samples 164]

Validates HumanEval's 164 canonical solutions (solution + tests + check) and prints validations/s
of the ptfactory pool (warm containers, one fresh directory per job, all cores) and of a cold
``docker run`` per sample with identical limits (the baseline), median of ``--repeats``, and the
ratio (goal >= 10x, and >= 20 validations/s on 2 cores).

    python bench/sandbox.py --compare-harness e23a69f [--repeats 5]

instead runs the same programs through one warm pool with the harness of that git revision and
with the current one, alternating, and prints validations/s and the CPU the containers used per
job (the ``docker`` cgroup's ``cpuacct.usage``: every container on the machine, so run it alone).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ptfactory.filters.execution.base import Job
from ptfactory.filters.execution.docker_sandbox import DockerSandbox, docker_client
from ptfactory.filters.execution.image import find_image
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.programs import extract_solution, program
from tests.filters.test_execution import humaneval

LIMITS = Limits(timeout_s=10, memory_mb=256, pids=64, cpus=1.0)


def programs(harness: str | None = None) -> list[str]:
    """The 164 programs; with ``harness`` (a harness.py's text) built around that one instead."""
    import ptfactory.filters.execution.programs as built

    current = built._HARNESS
    built._HARNESS = harness or current
    try:
        return _programs()
    finally:
        built._HARNESS = current


def _programs() -> list[str]:
    return [
        program(
            extract_solution(p["prompt"], p["canonical_solution"], p["entry_point"]),
            p["test"],
            p["entry_point"],
        )
        for p in humaneval()
    ]


def run_pool(texts: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    with DockerSandbox(LIMITS) as sandbox:  # pool creation counts: it is part of a partition's cost
        results = sandbox.run_many([Job({"program.py": t}) for t in texts])
    return time.perf_counter() - start, sum(r.passed for r in results)


def run_cold(texts: list[str]) -> tuple[float, int]:
    """One `docker run` per sample: the same isolation and limits, no pool."""
    client = docker_client()
    image = find_image(client)
    memory = f"{LIMITS.memory_mb}m"
    passed = 0
    start = time.perf_counter()
    for text in texts:
        container = client.containers.run(
            image,
            ["timeout", "-s", "KILL", str(LIMITS.timeout_s), "python3", "-c", text],
            detach=True,
            network_mode="none",
            read_only=True,
            tmpfs={"/work": "rw,noexec,nosuid,nodev,size=64m"},
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=LIMITS.pids,
            nano_cpus=int(LIMITS.cpus * 1e9),
            user="65534:65534",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            working_dir="/work",
        )
        passed += container.wait()["StatusCode"] == 0
        container.remove(force=True)
    return time.perf_counter() - start, passed


_CPU = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")  # cgroup v1, as on this machine


def compare_harness(revision: str, repeats: int) -> None:
    old = subprocess.run(
        ["git", "show", f"{revision}:filters/execution/harness.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sets = {revision: programs(old), "current": programs()}
    rates: dict[str, list[float]] = {k: [] for k in sets}
    cpu: dict[str, list[float]] = {k: [] for k in sets}
    with DockerSandbox(LIMITS) as sandbox:
        sandbox.run_many([Job({"program.py": t}) for t in sets["current"][:8]])  # start the pool
        for _ in range(repeats):
            for name, texts in sets.items():
                used = int(_CPU.read_text()) if _CPU.exists() else 0
                start = time.perf_counter()
                results = sandbox.run_many([Job({"program.py": t}) for t in texts])
                rates[name].append(len(texts) / (time.perf_counter() - start))
                if _CPU.exists():
                    cpu[name].append((int(_CPU.read_text()) - used) / 1e6 / len(texts))
                if not all(r.passed for r in results):
                    raise SystemExit(f"a canonical solution failed with the {name} harness")
    print(f"HumanEval canonical solutions, one warm pool, alternating, median of {repeats}")
    print("| harness | validations/s | container CPU ms/job |")
    print("|---|---|---|")
    for name in sets:
        ms = f"{statistics.median(cpu[name]):.1f}" if cpu[name] else "n/a"
        print(f"| {name} | {statistics.median(rates[name]):.1f} | {ms} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold-samples", type=int, default=164, help="fewer makes the slow baseline quicker")
    parser.add_argument(
        "--compare-harness", metavar="REVISION", help="the harness of this git revision vs now"
    )
    args = parser.parse_args()
    if args.compare_harness:
        compare_harness(args.compare_harness, args.repeats)
        return
    texts = programs()
    pool_rates, cold_rates = [], []
    for rep in range(args.repeats):
        seconds, passed = run_pool(texts)
        pool_rates.append(len(texts) / seconds)
        cold_seconds, cold_passed = run_cold(texts[: args.cold_samples])
        cold_rates.append(args.cold_samples / cold_seconds)
        print(
            f"  repeat {rep + 1}: pool {len(texts)} in {seconds:.1f}s ({passed} passed); "
            f"cold {args.cold_samples} in {cold_seconds:.1f}s ({cold_passed} passed)",
            flush=True,
        )
    pool, cold = statistics.median(pool_rates), statistics.median(cold_rates)
    print()
    print(
        f"HumanEval canonical solutions, limits {LIMITS.timeout_s:g}s / {LIMITS.memory_mb} MB / {LIMITS.pids} pids, "
        f"median of {args.repeats}"
    )
    print("| sandbox | validations/s |")
    print("|---|---|")
    print(f"| ptfactory warm pool | {pool:.1f} |")
    print(f"| cold `docker run` per sample | {cold:.2f} |")
    print(f"ratio {pool / cold:.1f}x (goal >= 10x); pool >= 20/s: {'yes' if pool >= 20 else 'no'}")


if __name__ == "__main__":
    main()
