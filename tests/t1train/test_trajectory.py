import json

import pytest

from t1train.trajectory import Trajectory, Turn, load_dataset, load_jsonl, save_jsonl, to_dataset


def make_traj(task="t", routed=True):
    turns = [
        Turn(
            prompt_len=3,
            sampled_ids=[10, 11],
            logprobs=[-0.5, -1.0],
            finish_reason="stop",
            bridge_ids=[1, 2],
            routed_experts=[[[0, 1]], [[2, 3]]] if routed else None,
            action={"kind": "command", "command": "ls"},
            observation="a\n[exit code: 0]",
            env_info={"exit_code": 0},
        ),
        Turn(
            prompt_len=7,
            sampled_ids=[12],
            logprobs=[-0.25],
            finish_reason="length",
            routed_experts=[[[1, 2]]] if routed else None,
            action={"kind": "submit"},
            reward=2.0,
        ),
    ]
    return Trajectory(
        task_id=task,
        seed=4,
        prompt_ids=[5, 6, 7],
        turns=turns,
        reward=2.0,
        termination="submit",
        checks={"passed": 2, "total": 3, "resolved": False, "checks": []},
        drift_events=[{"turn": 0, "kind": "history_rewrite", "detail": "x"}],
    )


def test_training_view_is_aligned():
    t = make_traj()
    assert t.token_ids() == [5, 6, 7, 10, 11, 1, 2, 12]
    assert t.loss_mask() == [0, 0, 0, 1, 1, 0, 0, 1]
    assert t.sampler_logprobs() == [0, 0, 0, -0.5, -1.0, 0, 0, -0.25]
    assert t.routed_experts() == [[[0, 1]], [[2, 3]], [[1, 2]]]
    assert make_traj(routed=False).routed_experts() is None


def test_jsonl_round_trip(tmp_path):
    path = tmp_path / "out" / "traj.jsonl"
    trajs = [make_traj("a"), make_traj("b", routed=False)]
    save_jsonl(trajs, path)
    save_jsonl([make_traj("c")], path, append=True)
    back = load_jsonl(path)
    assert [t.task_id for t in back] == ["a", "b", "c"]
    assert back[0] == trajs[0] and back[1] == trajs[1]
    assert json.loads(path.read_text().splitlines()[0])["format_version"] == 2


def test_unknown_format_version_is_refused():
    data = make_traj().to_dict() | {"format_version": 99}
    with pytest.raises(ValueError, match="re-run"):
        Trajectory.from_dict(data)


def test_loads_as_a_datasets_dataset(tmp_path):
    import datasets

    path = tmp_path / "traj.jsonl"
    save_jsonl([make_traj("a"), make_traj("b")], path)
    ds = load_dataset(path)
    assert isinstance(ds, datasets.Dataset) and len(ds) == 2
    row = ds[0]
    assert row["input_ids"] == [5, 6, 7, 10, 11, 1, 2, 12] and row["loss_mask"] == [0, 0, 0, 1, 1, 0, 0, 1]
    assert row["reward"] == 2.0 and row["passed"] == 2 and row["num_drift_events"] == 1
    assert to_dataset([make_traj()])[0]["routed_experts"] == [[[0, 1]], [[2, 3]], [[1, 2]]]
    # the raw per-turn JSONL also loads with the generic json loader
    raw = datasets.load_dataset("json", data_files=str(path), split="train")
    assert raw[0]["turns"][0]["sampled_ids"] == [10, 11]
