"""How many episodes are live at once (pure logic): every episode of a small batch, so each step
is one engine call over all of them; capped; never under the sandbox's own workers."""

import pytest

from ptfactory.generators.agent.settings import LIVE_EPISODES, AgentSection


@pytest.mark.parametrize(
    ("workers", "episodes", "sandbox", "live"),
    [
        (None, 6, 2, 6),  # the demo: 3 tasks x 2 rollouts, all live on a 2-core box
        (None, 1, 2, 2),
        (None, 100, 2, LIVE_EPISODES),
        (None, 100, 16, 16),
        (3, 6, 2, 3),  # factory.yaml's agent.workers decides when set
    ],
)
def test_live_episodes(workers: int | None, episodes: int, sandbox: int, live: int) -> None:
    assert AgentSection(workers=workers).live_episodes(episodes, sandbox) == live


def test_live_episodes_default_to_the_cores_without_sandbox_workers() -> None:
    import os

    assert AgentSection().live_episodes(1, None) == (os.cpu_count() or 1)
