"""Trajectory segments (format version 2): views, the one-segment contract, JSONL round trip, v1 lines."""

import json

import pytest

from t1train.trajectory import (
    Segment,
    Trajectory,
    Turn,
    load_jsonl,
    save_jsonl,
    to_dataset,
    training_record,
    training_records,
)


def turn(prompt_len, sampled, bridge=(), reward=0.0, routed=None, start=None, prompt_routed=None):
    return Turn(
        prompt_len=prompt_len,
        sampled_ids=list(sampled),
        logprobs=[-0.1 * (i + 1) for i in range(len(sampled))],
        finish_reason="stop",
        bridge_ids=list(bridge),
        routed_experts=routed,
        routed_experts_start=start,
        prompt_routed_experts=prompt_routed,
        reward=reward,
        action={"kind": "command", "command": "ls"},
    )


def two_segments():
    """Segment 0: prompt [1, 2], turns 0-1; segment 1 (rebuilt context): prompt [1, 2, 9, 9], turn 2."""
    turns = [
        turn(2, [10, 11], [3, 4], routed=[[[1]], [[2]]]),
        turn(6, [12], [], reward=0.5, routed=[[[3]]], start=3, prompt_routed=[[[7]], [[8]]]),
        turn(4, [13, 14], [], reward=2.0, routed=[[[4]], [[5]]], start=3, prompt_routed=[]),
    ]
    return Trajectory(
        task_id="t",
        seed=1,
        prompt_ids=[1, 2],
        turns=turns,
        reward=2.5,
        termination="submit",
        segments=[Segment([1, 2], 0, "start"), Segment([1, 2, 9, 9], 2, "drop_observations")],
    )


def test_a_plain_trajectory_is_one_segment_with_the_old_view():
    t = Trajectory(task_id="t", seed=None, prompt_ids=[5, 6], turns=[turn(2, [7, 8], [9]), turn(5, [10])])
    assert t.segments == [Segment([5, 6], 0, "start")] and t.num_segments == 1
    (view,) = t.segment_views()
    assert view.token_ids() == t.token_ids() == [5, 6, 7, 8, 9, 10]
    assert view.loss_mask() == t.loss_mask() == [0, 0, 1, 1, 0, 1]
    assert training_record(t)["input_ids"] == [5, 6, 7, 8, 9, 10]


def test_segment_views_split_turns_and_keep_each_prompt():
    t = two_segments()
    v0, v1 = t.segment_views()
    assert (v0.index, v0.reason, len(v0.turns), v1.index, v1.reason, len(v1.turns)) == (
        0,
        "start",
        2,
        1,
        "drop_observations",
        1,
    )
    assert v0.token_ids() == [1, 2, 10, 11, 3, 4, 12]
    assert v0.loss_mask() == [0, 0, 1, 1, 0, 0, 1]
    assert v0.sampler_logprobs() == pytest.approx([0, 0, -0.1, -0.2, 0, 0, -0.1])
    assert v1.token_ids() == [1, 2, 9, 9, 13, 14]
    assert v1.loss_mask() == [0, 0, 0, 0, 1, 1]
    assert v1.routed_experts() == [[[4]], [[5]]]
    # routing positions are relative to the segment: turn 2's rows start at position 3 of segment 1
    rows, recorded = v1.routed_experts_by_position()
    assert rows == [[[0]], [[0]], [[0]], [[4]], [[5]], [[0]]]
    assert recorded == [False, False, False, True, True, False]
    rows0, recorded0 = v0.routed_experts_by_position()
    assert rows0[1:6] == [[[1]], [[2]], [[7]], [[8]], [[3]]] and recorded0 == [False] + [True] * 5 + [False]


def test_multi_segment_whole_sequence_methods_refuse():
    t = two_segments()
    for method in (t.token_ids, t.loss_mask, t.sampler_logprobs, t.routed_experts, t.routed_experts_by_position):
        with pytest.raises(ValueError, match="segment_views"):
            method()
    with pytest.raises(ValueError, match="training_records"):
        training_record(t)


def test_segments_must_start_at_the_prompt_and_increase():
    with pytest.raises(ValueError, match="segment 0"):
        Trajectory(task_id="t", seed=None, prompt_ids=[1], segments=[Segment([2], 0)])
    with pytest.raises(ValueError, match="must increase"):
        Trajectory(task_id="t", seed=None, prompt_ids=[1], segments=[Segment([1], 0), Segment([3], 0, "summary")])


def test_training_records_one_row_per_segment_with_episode_reward():
    t = two_segments()
    recs = training_records(t)
    assert [r["segment"] for r in recs] == [0, 1] and {r["num_segments"] for r in recs} == {2}
    assert [r["turn_rewards"] for r in recs] == [[0.0, 0.5], [2.0]]
    assert {r["reward"] for r in recs} == {2.5} and {r["num_turns"] for r in recs} == {3}
    ds = to_dataset([t, Trajectory(task_id="u", seed=None, prompt_ids=[5], turns=[turn(1, [6])])])
    assert len(ds) == 3
    assert ds[1]["input_ids"] == [1, 2, 9, 9, 13, 14] and ds[2]["task_id"] == "u" and ds[2]["num_segments"] == 1


def test_v2_round_trip_and_v1_line_loads_as_one_segment(tmp_path):
    path = tmp_path / "traj.jsonl"
    t = two_segments()
    save_jsonl([t], path)
    line = json.loads(path.read_text())
    assert line["format_version"] == 2 and line["segments"][1] == {
        "prompt_ids": [1, 2, 9, 9],
        "first_turn": 2,
        "reason": "drop_observations",
    }
    assert load_jsonl(path) == [t]
    v1 = Trajectory(task_id="old", seed=0, prompt_ids=[5, 6], turns=[turn(2, [7])]).to_dict()
    del v1["segments"]
    v1["format_version"] = 1
    path.write_text(json.dumps(v1) + "\n")
    (old,) = load_jsonl(path)
    assert old.segments == [Segment([5, 6], 0, "start")] and old.token_ids() == [5, 6, 7]
