"""RL framework adapters over the same sandboxed Episode, duck-typed so no framework is a dependency.

- `skyrl.DataWorldTextEnv`: the SkyRL text-env shape (`__init__(env_config, extras)`, `init`, `step`, `close`).
- `verl.DataWorldTool`: a verl tool (async `create`, `execute`, `calc_reward`, `release`) that keeps one live
  session per trajectory.

Both find their task in the dataset row: `extras["extra_info"]["task_path"]` (SkyRL) or the tool's
`create_kwargs["task_path"]` (verl), a `tasks/<task_id>.json` inside its world directory.
"""
