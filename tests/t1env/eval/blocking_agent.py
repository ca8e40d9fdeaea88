"""A test agent for the Ctrl-C test: the oracle, except that on the task named by $T1_TEST_BLOCK_TASK it writes
$T1_TEST_BLOCK_MARKER and then keeps running `sleep 1` until the episode is stopped or runs out of turns."""

import os
from pathlib import Path

from t1env.agent.reference import OracleAgent


class BlockingOracle:
    def __init__(self, task):
        self.task = task
        self.oracle = OracleAgent(task)
        self.block = os.environ.get("T1_TEST_BLOCK_TASK") == task.id

    def act(self, observation, info):
        if self.block:
            Path(os.environ["T1_TEST_BLOCK_MARKER"]).write_text(self.task.id)
            return {"command": "sleep 1"}
        return self.oracle.act(observation, info)


class RaisingAgent:
    def __init__(self, task):
        pass

    def act(self, observation, info):
        raise RuntimeError("the model fell over")
