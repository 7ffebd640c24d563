"""The environment interfaces over one sandboxed episode: Gymnasium, SkyRL's text env and a verl tool.

Each is tested the way its users drive it; observations must never carry the rubric, the expected or
reference answers, the task's files list or a path into the world directory.
"""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import worldgen.env
from rubrics.grade import load_task
from worldgen.env import ENV_ID, DataWorldEnv
from worldgen.integrations.skyrl import DataWorldTextEnv
from worldgen.integrations.verl import DataWorldTool
from worldgen.sandbox import Limits

LIMITS = Limits(memory_mb=2048, step_timeout_s=30)


@pytest.fixture(scope="module")
def world(world_dirs) -> Path:
    return world_dirs[0]


@pytest.fixture(scope="module")
def task_file(world) -> Path:
    return sorted((world / "tasks").glob("*.json"))[0]


def secrets_of(world: Path, task_file: Path) -> list[str]:
    """Strings that must never appear in what the agent sees."""
    task = load_task(task_file)
    found = [item.criterion for item in task.rubric]
    found += [str(world), str(task_file), "canonical", "contract.json", "projection.json", "ledger", "rubric"]
    found += ["expected_answer", "reference_answer", json.dumps(task.files)]
    return found


def test_registered_and_passes_gymnasiums_env_checker(world):
    assert ENV_ID in gym.registry and worldgen.env.DataWorldEnv is DataWorldEnv
    env = gym.make(ENV_ID, tasks=str(world), limits=LIMITS, max_steps=5)
    check_env(env.unwrapped)  # spaces, seeded reset determinism, a random-string step twice with equal results
    env.close()


def test_reset_draws_tasks_reproducibly_and_hides_the_answer(world, task_file):
    env = DataWorldEnv(tasks=world, limits=LIMITS, max_steps=3)
    firsts = [env.reset(seed=seed)[1]["task_id"] for seed in (0, 1, 2, 3, 0, 1, 2, 3)]
    assert firsts[:4] == firsts[4:] and len(set(firsts)) > 1
    obs, info = env.reset(seed=0, options={"task": str(task_file)})
    task = load_task(task_file)
    assert info["task_id"] == task.task_id and obs.startswith(task.prompt)
    observed = sorted(p.name for p in (world / "observed").iterdir())
    assert all(f"data/{name} (" in obs for name in observed), "every observed file is listed with its size"
    assert json.dumps(task.answer_schema, indent=1) in obs
    seen = [obs, json.dumps(info)]
    for action in (
        "<python>import os\nprint(sorted(os.listdir('data')), sorted(os.listdir('..')))</python>",
        "<python>print('日本語 → ✓')</python>",
        "no tags at all",
    ):
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs)
        seen += [obs, json.dumps(info, default=str)]
    assert "?" in seen[4] and "→" in seen[4], "unknown characters become '?', known ones stay"
    assert truncated and not terminated and reward == 0.0, "the step budget truncates with reward 0"
    for secret in secrets_of(world, task_file):
        assert not any(secret in text for text in seen), secret
    env.close()


def test_answers_end_the_episode_with_the_rules_judges_score(world, task_file):
    task = load_task(task_file)
    env = DataWorldEnv(tasks=world, limits=LIMITS)
    env.reset(seed=0, options={"task": str(task_file)})
    obs, reward, terminated, truncated, info = env.step(f"<answer>{json.dumps(task.expected_answer)}</answer>")
    assert (reward, terminated, truncated) == (1.0, True, False)
    env.reset(seed=0, options={"task": str(task_file)})
    obs, reward, terminated, _, info = env.step("<answer>{not json</answer>")
    assert terminated and reward == 0.0 and "not valid JSON" in obs
    env.reset(seed=0, options={"task": str(task_file)})
    fenced = "Done.\n<answer>\n```json\n" + json.dumps(task.expected_answer) + "\n```\n</answer>"
    assert env.step(fenced)[1] == 1.0, "a fenced JSON answer is read too"
    env.close()


def test_skyrl_text_env_shape(world, task_file):
    task = load_task(task_file)
    env = DataWorldTextEnv({"max_steps": 4, "memory_mb": 2048}, {"extra_info": {"task_path": str(task_file)}})
    messages, info = env.init([])
    assert messages[0]["role"] == "user" and messages[0]["content"].startswith(task.prompt)
    out = env.step("<python>x = 21\nx * 2</python>")
    assert set(out) >= {"observations", "reward", "done", "metadata"}
    assert out["observations"][0]["content"] == "<information>\n42\n</information>" and not out["done"]
    out = env.step(f"<answer>{json.dumps(task.expected_answer)}</answer>")
    assert out["done"] and out["reward"] == 1.0 and out["observations"] == []
    env.close()
    given = [{"role": "user", "content": "a row's own prompt"}]
    env = DataWorldTextEnv({}, {"task_path": str(task_file)})
    assert env.init(given)[0] == given
    env.close()


def test_verl_tool_keeps_one_session_per_trajectory_across_per_call_instances(task_file):
    task = load_task(task_file)
    tool = DataWorldTool({"memory_mb": 2048})
    kwargs = {"create_kwargs": {"task_path": str(task_file)}}

    async def call(request_id: str, parameters: dict) -> tuple:
        instance, _ = await tool.create(**kwargs)  # verl 0.9: a fresh instance around every call
        try:
            agent_data = types.SimpleNamespace(request_id=request_id)
            return await tool.execute(instance, parameters, agent_data=agent_data)
        finally:
            await tool.release(instance)

    async def scenario():
        await call("trajectory-a", {"code": "kept = 'a'"})
        await call("trajectory-b", {"code": "kept = 'b'"})
        first, _, _ = await call("trajectory-a", {"code": "print(kept)"})
        second, _, _ = await call("trajectory-b", {"code": "print(kept)"})
        assert first.text == "<information>\na\n</information>" and second.text == "<information>\nb\n</information>"
        assert len(tool.episodes) == 2
        response, reward, metrics = await call("trajectory-a", {"answer": task.expected_answer})
        assert reward == 1.0 and metrics["done"] and "trajectory-a" not in tool.episodes
        instance, _ = await tool.create(create_kwargs={"trajectory_id": "trajectory-a"})
        assert await tool.calc_reward(instance) == 1.0
        await tool.release(instance)

    asyncio.run(scenario())
    assert tool.get_openai_tool_schema()["function"]["name"] == tool.name == "python"
    tool.close()
    assert not tool.episodes
