"""A real two-node Ray cluster on this machine, and the corpora the scaling tests and bench feed it.

The head and the worker are separate ``ray start --block`` processes, each its own session
(process group), with its own CPUs and a custom resource (``head`` / ``worker``); every Ray
server binds 127.0.0.1 and the dashboard (the state API's server) too. Stopping kills each
node's process group by its id: ``ray stop`` would stop every Ray process on the machine.

Ray turns 127.0.0.1 into the machine's outward address, for a node joining a cluster too;
:func:`_launch` (``python -m tests.scaling.raycluster start ...``) keeps the loopback address.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ptfactory.storage.schema import DECISION, MESSAGE_V1, MESSAGES, PROVENANCE, conform, from_records

__all__ = ["RayCluster", "code_rows", "start_cluster", "text_corpus", "text_samples"]

_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RayCluster:
    address: str
    dashboard: str
    head: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    directory: Path
    worker_cpus: int = 1
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 120
    # Worker node ids killed here: Ray may go on listing a killed node as alive for a while.
    dead: set[str] = field(default_factory=set)

    def node_ids(self) -> dict[str, str]:
        """``{"head": node id, "worker": node id}`` from the nodes' custom resources."""
        import ray

        out = {}
        for node in ray.nodes():
            for role in ("head", "worker"):
                if node["Alive"] and role in node["Resources"] and node["NodeID"] not in self.dead:
                    out[role] = node["NodeID"]
        return out

    def ensure_worker(self) -> dict[str, str]:
        """Start a fresh worker node if the last one was killed or Ray marked it dead (a loaded
        box can miss its heartbeats); the node ids, as node_ids().

        It waits for a worker node id never seen before: a killed node can still read as alive
        for a few seconds, and a node count would take it for the new one."""
        import ray

        if self.worker.poll() is None and "worker" in self.node_ids():
            return self.node_ids()
        self.kill_worker()  # a process whose node Ray declared dead is of no use
        self.worker = _start_worker(self.address, self.worker_cpus, self.directory, self.env)
        log = self.directory / "worker.log"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.worker.poll() is not None:
                raise RuntimeError(f"the new Ray worker node exited; see {log}:\n{log.read_text()[-3000:]}")
            fresh = [
                n
                for n in ray.nodes()
                if n["Alive"] and "worker" in n["Resources"] and n["NodeID"] not in self.dead
            ]
            if fresh:
                return self.node_ids()
            time.sleep(0.5)
        raise TimeoutError(f"a new Ray worker node did not come up within {self.timeout_s:.0f} s; see {log}")

    def kill_worker(self) -> None:
        """SIGKILL the worker node: its raylet, object store, agents and task processes at once."""
        import ray

        self.dead |= {n["NodeID"] for n in ray.nodes() if "worker" in n["Resources"]}
        _kill_node(self.worker)

    def stop(self) -> None:
        for process in (self.worker, self.head):
            _kill_node(process)


def _kill_node(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a node's process group, and its task processes by descent: Ray's workers leave the
    group (an actor's worker was seen outside it), and one left alive would finish its running task
    after its node died, which no machine's death allows (the validation kill test then found
    nothing resent)."""
    escaped = [p for p in _descendants(process.pid) if _group(p) != process.pid]
    with contextlib.suppress(ProcessLookupError):  # the group: `ray start` may be gone, its raylet not
        os.killpg(process.pid, signal.SIGKILL)
    for pid in escaped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def _descendants(pid: int) -> list[int]:
    """Every living process descended from ``pid`` (from /proc: parents do not change groups)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                # the fields after the command's closing parenthesis: state, ppid, pgrp, ...
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.scaling.raycluster",
                "start",
                "--block",
                "--disable-usage-stats",
                *args,
            ],
            cwd=_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed as one, by its id
        )


def _wait_nodes(count: int, head: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"a Ray node exited during start-up; see {log}:\n{log.read_text()[-3000:]}")
        if sum(1 for n in ray.nodes() if n["Alive"]) >= count:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{count} Ray nodes did not come up within {timeout_s:.0f} s; see {log.parent}")


@contextlib.contextmanager
def start_cluster(head_cpus: int = 1, worker_cpus: int = 1, timeout_s: float = 120) -> Iterator[RayCluster]:
    """A head and a worker node (each with ``*_cpus``), the driver connected; all stopped after."""
    import ray
    from ray._private import ray_constants

    cluster_mode = ray_constants.ENABLE_RAY_CLUSTER

    directory = Path(tempfile.mkdtemp(prefix="ptf-ray-"))
    port, dashboard = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": str(_ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    head = _start(
        [
            "--head",
            "--port",
            str(port),
            "--num-cpus",
            str(head_cpus),
            "--resources",
            json.dumps({"head": 1}),
            "--include-dashboard",
            "true",  # the state API (list_tasks) is served by the dashboard
            "--dashboard-host",
            "127.0.0.1",
            "--dashboard-port",
            str(dashboard),
            "--ray-client-server-port",
            str(_free_port()),
            "--temp-dir",
            str(directory / "head"),
        ],
        directory / "head.log",
        env,
    )
    worker = None
    cluster = None
    try:
        _wait_for_port(port, head, directory / "head.log", timeout_s)
        worker = _start_worker(f"127.0.0.1:{port}", worker_cpus, directory, env)
        # The driver, too, stays on 127.0.0.1: with this off Ray takes the loopback address as the
        # node's own (it is read when needed, so setting it here works after `import ray`).
        ray_constants.ENABLE_RAY_CLUSTER = False
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
        _wait_nodes(2, worker, directory / "worker.log", timeout_s)
        cluster = RayCluster(
            f"127.0.0.1:{port}",
            f"http://127.0.0.1:{dashboard}",
            head,
            worker,
            directory,
            worker_cpus,
            env,
            timeout_s,
        )
        yield cluster
    finally:
        ray.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
        for process in (cluster.worker if cluster else worker, head):
            if process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(directory, ignore_errors=True)


def _start_worker(address: str, cpus: int, directory: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return _start(
        ["--address", address, "--num-cpus", str(cpus), "--resources", json.dumps({"worker": 1})],
        directory / "worker.log",
        env,
    )


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Ray head exited during start-up; see {log}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.3)
    raise TimeoutError(f"the Ray head did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s; see {log}")


def text_corpus(rows: int, seed: int = 0) -> list[str]:
    """``rows`` texts of 80 Zipf-distributed words: one in ten a near copy of the row before (one
    word changed), one in fifty an exact copy of an earlier row, and a few empty texts."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwyp"))
    lengths = rng.integers(3, 9, size=20_000)
    chars = letters[rng.integers(0, len(letters), size=int(lengths.sum()))].tolist()
    cuts = np.concatenate(([0], np.cumsum(lengths))).tolist()
    vocab = ["".join(chars[a:b]) for a, b in itertools.pairwise(cuts)]
    ids = (rng.zipf(1.3, size=(rows, 80)) % len(vocab)).tolist()
    texts = [" ".join([vocab[j] for j in row]) for row in ids]
    for i in range(10, rows, 10):
        words = texts[i - 1].split(" ")
        words[40] = "changed"
        texts[i] = " ".join(words)
    for i in range(25, rows, 50):
        texts[i] = texts[int(rng.integers(0, i))]
    for i in range(7, rows, 20_000):
        texts[i] = ""
    return texts


def text_samples(texts: list[str], batch: str = "b1") -> pa.Table:
    """Sample rows (an instruction and the text as the answer), built column-wise (200k rows in a
    second); one in 97 a human reference, so the keeper rule's preference for references counts."""
    n = len(texts)
    roles = pa.array(["user", "assistant"] * n, pa.string())
    contents = pa.array([part for text in texts for part in ("Write.", text)], pa.string())
    turns = pa.StructArray.from_arrays([roles, contents], fields=list(MESSAGE_V1))  # cast to MESSAGES below
    messages = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2), pa.int32()), turns)
    method = pa.array(["reference" if i % 97 == 3 else "generated" for i in range(n)], pa.string())
    provenance = pa.StructArray.from_arrays(
        [method if f.name == "method" else pa.nulls(n, f.type) for f in PROVENANCE],
        fields=list(PROVENANCE),
    )
    return conform(
        pa.table(
            {
                "sample_id": pa.array([f"s{i:08d}" for i in range(n)], pa.string()),
                "batch": pa.array([batch] * n, pa.string()),
                "kind": pa.array(["sft"] * n, pa.string()),
                "messages": messages.cast(MESSAGES),
                "provenance": provenance,
                "decisions": pa.ListArray.from_arrays(
                    pa.array(np.zeros(n + 1, np.int32)), pa.array([], DECISION)
                ),
            }
        )
    )


# Mutants left out: HumanEval/39's second grows a list until the memory cap or the time limit
# stops it, whichever comes first on a loaded box (a status that depends on timing cannot be
# compared row for row); HumanEval/25's second loops forever, spinning a core for the whole time
# limit (the rows that sleep past the limit cover timeouts at no CPU cost).
_LEFT_OUT = {("HumanEval/39", 1), ("HumanEval/25", 1)}


def code_rows(count: int) -> pa.Table:
    """``count`` code rows from HumanEval, cycling through its 164 problems: canonical solutions
    (pass), `return None` and the real mutants of tests/filters/test_execution.py (fail; a few
    pass), a solution that sleeps past any time limit every 1,000 rows (timeout) and one that
    calls ``SystemExit`` every 89 (failed)."""
    from tests.filters.test_execution import humaneval, mutants

    problems = humaneval()
    records = []
    for i in range(count):
        problem = problems[i % len(problems)]
        body = problem["canonical_solution"]
        wrong = mutants(problem)
        usable = [m for k, m in enumerate(wrong) if k and (problem["task_id"], k) not in _LEFT_OUT]
        if i % 1000 == 2:
            body = "    import time\n    time.sleep(60)\n"
        elif i % 89 == 4:
            body = "    raise SystemExit(3)\n"
        elif i % 5 == 1:
            body = wrong[0]  # return None
        elif i % 5 == 3 and usable:
            body = usable[(i // len(problems)) % len(usable)]
        records.append(
            {
                "sample_id": f"c{i:06d}",
                "batch": "b1",
                "kind": "code",
                "messages": [
                    {"role": "user", "content": problem["prompt"]},
                    {"role": "assistant", "content": body},
                ],
                "tests": problem["test"],
                "entry_point": problem["entry_point"],
                "language": "python",
            }
        )
    return from_records(records)


def _launch() -> None:
    """``ray start`` that keeps 127.0.0.1: Ray would swap the loopback address for the machine's
    outward one (for the node's own address and for the head's), and bind its servers there."""
    from ray._private import services
    from ray.scripts.scripts import main

    services.node_ip_address_from_perspective = lambda address=None: "127.0.0.1"
    sys.argv = ["ray", *sys.argv[1:]]
    main()


if __name__ == "__main__":
    _launch()
