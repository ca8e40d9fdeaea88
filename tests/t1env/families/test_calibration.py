"""Calibration of the family sample that `t1env validate --all` runs: oracle full marks on 2 identical runs,
the no-op agent less than full marks, at least 3 checks. The exploit gate is left to `t1env validate --all`, which
CI (.ci/run) runs on the same sample with 3 oracle runs; the gate's own tests are tests/t1env/test_exploits.py."""

import pytest

from t1env.families import calibration_refs
from t1env.tools.validate import validate_task


@pytest.mark.slow
@pytest.mark.parametrize("ref", calibration_refs())
def test_family_instance_is_calibrated(ref):
    v = validate_task(ref, runs=2, exploits=False)
    assert v.ok, v.problems
    assert all(p == t for p, t in v.oracle) and len(v.oracle) == 2
    assert v.nop is not None and v.nop[0] < v.nop[1]
