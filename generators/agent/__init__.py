"""Agent trajectories: ``kind: agent`` tasks (:mod:`.tasks`), the model's side of an episode
(:mod:`.policy`), rollouts over the sandboxed episode pool (:mod:`.rollout`), step rewards
(:mod:`.rewards`), the trajectory table (:mod:`.record`) and replay (:mod:`.replay`)."""
