"""The platform redesign changed no result: 5 fixed steps of every method equal the record.

The record (``tests/golden/five_steps.json``) was written by ``python -m tests.golden_steps
--write`` on the code before the platform redesign. Losses and every parameter leaf's sum, sum
of squares and first values must agree to float32 rounding (rtol 1e-5; XLA may fuse a reshaped
graph differently, which moves the last bits).
"""
import json

import numpy as np
import pytest

from tests import golden_steps

RECORD = json.loads(golden_steps.PATH.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("method", golden_steps.METHODS)
def test_five_steps_equal_the_record(method):
  want, got = RECORD[method], golden_steps.run(method)
  assert got["step"] == want["step"] == golden_steps.NUM_STEPS
  np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5)
  assert sorted(got["leaves"]) == sorted(want["leaves"]), "parameter names changed"
  for name, w in want["leaves"].items():
    g = got["leaves"][name]
    np.testing.assert_allclose(g["sumsq"], w["sumsq"], rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(g["head"], w["head"], rtol=1e-5, atol=1e-7, err_msg=name)
    np.testing.assert_allclose(g["sum"], w["sum"], rtol=1e-4, atol=1e-5 * np.sqrt(w["sumsq"]),
                               err_msg=name)


def test_image_only_batches_equal_the_record():
  assert golden_steps.batch_indices() == RECORD["batch_indices"]
