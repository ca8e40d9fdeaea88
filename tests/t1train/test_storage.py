"""Files a killed run leaves behind: torn JSONL tails, episode logs that resume without duplicates, atomic files
and folders."""

import json
import multiprocessing
import os
import time

import pytest

from t1train import storage
from t1train.storage import EpisodeLog, publish_dir, read_jsonl, staging_dir, write_text_atomic
from t1train.trajectory import Trajectory, load_jsonl, save_jsonl


def traj(i: int) -> Trajectory:
    return Trajectory(task_id=f"t{i}", seed=i, prompt_ids=[1, 2, 3], reward=float(i), metadata={"episode": i})


def by_episode(record: dict) -> int:
    return record["metadata"]["episode"]


def test_a_torn_last_line_is_skipped_and_the_rest_loads(tmp_path):
    path = tmp_path / "t.jsonl"
    save_jsonl([traj(0), traj(1)], path)
    whole = json.dumps(traj(2).to_dict())
    with path.open("a") as f:
        f.write(whole[: len(whole) // 2])  # the writer was killed in the middle of its line
    with pytest.warns(UserWarning, match="torn last line"):
        loaded = load_jsonl(path)
    assert [t.seed for t in loaded] == [0, 1]


def test_damage_before_the_last_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"t\.jsonl:2: not a JSON line"):
        read_jsonl(path)


def test_appending_after_a_torn_tail_cuts_it_off(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(traj(0).to_dict()) + "\n" + '{"task_id": "t1", "se')
    with EpisodeLog(path, key=by_episode) as log:
        assert [by_episode(r) for r in log.records()] == [0]
        assert log.append(traj(1).to_dict())
    assert [t.seed for t in load_jsonl(path)] == [0, 1]  # no warning: the file is whole again


def test_a_complete_last_line_without_its_newline_is_kept(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(traj(0).to_dict()))  # killed between the record and its newline
    with EpisodeLog(path, key=by_episode) as log:
        log.append(traj(1).to_dict())
    assert [t.seed for t in load_jsonl(path)] == [0, 1]


def test_an_episode_already_in_the_log_is_not_written_again(tmp_path):
    path = tmp_path / "t.jsonl"
    with EpisodeLog(path, key=by_episode) as log:
        assert log.append(traj(0).to_dict()) and not log.append(traj(0).to_dict())
    with EpisodeLog(path, key=by_episode) as log:  # a resumed run
        assert log.keys == {0}
        assert not log.append(traj(0).to_dict()) and log.append(traj(1).to_dict())
    assert [t.seed for t in load_jsonl(path)] == [0, 1]


def _try_to_open(path, queue):
    try:
        EpisodeLog(path, key=by_episode)
        queue.put("opened")
    except ValueError as err:
        queue.put(str(err))


def test_a_second_writer_of_the_same_log_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "LOCK_WAIT_SECONDS", 0.2)  # the writer holds the lock throughout: no need to wait 5 s
    path = tmp_path / "t.jsonl"
    with EpisodeLog(path, key=by_episode):
        queue = multiprocessing.get_context("fork").Queue()
        proc = multiprocessing.get_context("fork").Process(target=_try_to_open, args=(path, queue))
        proc.start()
        proc.join()
        assert "being written by another process" in queue.get()


def test_rewind_moves_later_records_aside_without_losing_any(tmp_path):
    path, aside = tmp_path / "t.jsonl", tmp_path / "aside.jsonl"
    with EpisodeLog(path, key=by_episode) as log:
        for i in range(5):
            log.append(traj(i).to_dict())
        assert log.rewind(lambda r: by_episode(r) < 3, aside) == 2
        assert log.keys == {0, 1, 2}
        assert log.append(traj(3).to_dict())  # the redone episode is not a duplicate
    assert [t.seed for t in load_jsonl(path)] == [0, 1, 2, 3]
    assert [t.seed for t in load_jsonl(aside)] == [3, 4]


def test_save_jsonl_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "t.jsonl"
    save_jsonl([traj(0)], path)
    broken = traj(1)
    broken.metadata["x"] = object()  # not JSON-serializable
    with pytest.raises(TypeError):
        save_jsonl([traj(1), broken], path)
    assert [t.seed for t in load_jsonl(path)] == [0]
    assert os.listdir(tmp_path) == ["t.jsonl"]  # no temp file left behind


def test_write_text_atomic_replaces_the_whole_file(tmp_path):
    path = tmp_path / "sub" / "r.json"
    write_text_atomic(path, "old")
    write_text_atomic(path, "new")
    assert path.read_text() == "new" and os.listdir(path.parent) == ["r.json"]


def test_publish_dir_puts_a_complete_folder_in_place(tmp_path):
    final = tmp_path / "checkpoint-2"
    (tmp_path / ".checkpoint-2.partial").mkdir()
    (tmp_path / ".checkpoint-2.partial" / "junk").write_text("from a killed save")
    staging = staging_dir(final)
    assert not any(staging.iterdir())  # a leftover from a killed save is emptied
    (staging / "model.bin").write_text("weights")
    publish_dir(staging, final)
    assert os.listdir(tmp_path) == ["checkpoint-2"] and (final / "model.bin").read_text() == "weights"
    staging = staging_dir(final)  # the same step saved again replaces it whole
    (staging / "model.bin").write_text("weights 2")
    publish_dir(staging, final)
    assert os.listdir(tmp_path) == ["checkpoint-2"] and (final / "model.bin").read_text() == "weights 2"


def _writer_with_a_forked_child(path, ready):
    log = EpisodeLog(path, key=by_episode)
    log.append(traj(0).to_dict())
    if os.fork() == 0:  # what Popen(preexec_fn=...) makes before it execs: a child sharing the log's open file
        time.sleep(0.5)
        os._exit(0)
    ready.set()
    time.sleep(60)


def test_a_killed_writers_forked_child_does_not_block_the_resume(tmp_path):
    """SIGKILL a writer while a child it forked still shares the log's open file (and so its lock): reopening the log
    waits for the child to go instead of refusing the resume (the CI flake of the killed-rollout test)."""
    path = tmp_path / "t.jsonl"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_writer_with_a_forked_child, args=(path, ready))
    proc.start()
    assert ready.wait(30)
    proc.kill()
    proc.join()
    with EpisodeLog(path, key=by_episode) as log:  # before the fix: "is being written by another process"
        assert log.keys == {0}
