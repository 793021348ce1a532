"""`benchmarks/fingerprint.py`: its cases configure the entry points' configs as they name them."""
from benchmarks import fingerprint


def test_cases_set_their_fields_and_name_the_overlap_in_this_checkouts_terms():
  table = fingerprint.cases()
  assert {"ds1_gemm_bfloat16", "ds4_flax_float32", "mn1_fast_bfloat16", "ds1_full_fast"} <= set(
      table)
  config = fingerprint._configured(*table["ds4_vmap_overlap"])  # pylint: disable=protected-access
  assert (config.num_seeds, config.seed_layout, config.assignment_placement) == (
      4, "vmap", "overlapped")
  assert (config.cascade.discrete_start, config.num_steps, config.log_every) == (5, 10, 1)
  config = fingerprint._configured(*table["mn1_gemm_bfloat16"])  # pylint: disable=protected-access
  assert (config.model.conv_impl, config.model.dtype, config.num_steps) == ("gemm", "bfloat16", 5)
  assert config.assignment_placement == "auto" and not config.progress_bar
