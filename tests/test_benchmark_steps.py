"""The steps the benchmarks time are the trainer's: ``benchmarks.loop``'s bare step computes what
the trainer's step of the loop's phase (``codes.step(method.for_phase(method.phase(step)))``)
computes, from the same state and batch."""
import jax
import numpy as np
import pytest

from benchmarks import step_timing
from disentangle import config as config_lib
from disentangle import methods
from disentangle.reproduce import throughput
from disentangle.train import codes
from experiments.configs import mnist_cascade
from experiments.configs import mnist_jointvae

_CONFIGS = {"cascadevae": mnist_cascade, "jointvae": mnist_jointvae}


def _smoke(method: str, **fields):
  """``method``'s MNIST config (CascadeVAE's: the loop benchmark's figure) at the smoke schedule
  and batch 8."""
  config = _CONFIGS[method].get_config("smoke")
  with config.unlocked():
    config.batch_size = 8
    config.model.conv_impl = "flax"  # XLA:CPU compiles it fastest; the same numbers
    config.mesh.num_devices = 1  # the benchmark host's one CPU device, of the tests' eight
    for name, value in fields.items():
      config_lib.set_field(config, name, value)
  return config


@pytest.mark.parametrize("method, fields, warmup, codes_solved", [
    ("cascadevae", {}, 20, True),                                # t_d = 0: after t_d
    ("cascadevae", {"cascade.discrete_start": 100}, 20, False),  # before t_d, the whole run
    ("jointvae", {}, 20, False),                                 # one phase
])
def test_loop_bare_step_is_the_trainers_step_of_the_timed_phase(method, fields, warmup,
                                                                codes_solved):
  config = _smoke(method, **fields)
  with config.unlocked():
    config.num_steps = warmup + 40
  bench = step_timing.bare_step(config, warmup)
  built = methods.build(config, throughput.image_shape(config))
  assert bench.phase == built.phase(warmup)
  trainers = built.for_phase(built.phase(warmup))
  assert (trainers.code_solve is not None) == codes_solved
  state, batch = jax.device_get((bench.state, bench.batches[0]))  # on the host: the step donates
  _, want = jax.jit(codes.step(trainers))(state, batch)
  bench.step()  # its first batch: ``batches[0]``
  got = jax.device_get(bench.last_metrics)
  assert sorted(got) == sorted(want)
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=1e-6, err_msg=name)
  assert ("discrete_active" in want and float(want["discrete_active"]) == 1.0) == codes_solved


def _build_step_of_no_phase():
  step_timing.build_step(_smoke("cascadevae"), (32, 32, 1), phase=None)


def _loop_across_t_d():
  config = _smoke("cascadevae", **{"cascade.discrete_start": 30})
  with config.unlocked():
    config.num_steps = 60
  step_timing.bare_step(config, warmup=20)


@pytest.mark.parametrize("build, message", [
    (_build_step_of_no_phase, "has phases"),  # CascadeVAE: True after t_d, False before
    (_loop_across_t_d, "two phases"),         # the timed steps 20 to 60 hold t_d = 30
])
def test_a_step_of_no_single_phase_is_refused(build, message):
  with pytest.raises(ValueError, match=message):
    build()
