"""Calibration of the family sample that `t1env validate --all` runs: oracle full marks on 3 identical runs,
the no-op agent less than full marks, at least 3 checks."""

import pytest

from t1env.families import calibration_refs
from t1env.validate import validate_task


@pytest.mark.slow
@pytest.mark.parametrize("ref", calibration_refs())
def test_family_instance_is_calibrated(ref):
    v = validate_task(ref, runs=3)
    assert v.ok, v.problems
    assert all(p == t for p, t in v.oracle) and len(v.oracle) == 3
    assert v.nop is not None and v.nop[0] < v.nop[1]
