"""Every shipped config (`experiments.aggregate.config_modules()`), every variant: it validates,
the published rows name variants, the smoke variant is short (on the renderer for dSprites), and
the module's smoke config (its default where it has none) builds its method. On dSprites and the
sets drawn from it, every variant but the smoke ones needs the official file (`stand_in`)."""
import pytest

from disentangle import data
from disentangle import methods
from disentangle.data.tfds import layouts
from experiments import aggregate

MODULES = {m.__name__.rpartition(".")[2]: m for m in aggregate.config_modules()
           if hasattr(m, "get_config")}
# Image shapes of the datasets the configs name (the TFDS layouts', and those served by files).
SHAPES = {**{name: layout.image_shape for name, layout in layouts.LAYOUTS.items()},
          "chairs": (64, 64, 1), "dsprites_unfair": (64, 64, 1)}
NO_SMOKE = {"smallnorb_betavae"}  # no offline stand-in of smallNORB: its default config builds


def stand_in(config) -> bool | None:
  """On a dSprites-based set: whether a run of ``config`` may train on the procedural renderer
  (asked for, or a stand-in taken where the file is missing: `trainer.load_training_data`);
  None on the other sets."""
  d = config.dataset
  if d.name not in data.DSPRITES_BASED or d.source == "tfds":
    return None
  return d.source == "render" or bool(d.synthetic_if_missing)


def test_the_modules_are_the_experiments():
  assert len(MODULES) >= 21 and {"shapes3d_betavae", "smallnorb_betavae"} <= set(MODULES)
  assert NO_SMOKE <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_variant_validates_and_the_smoke_config_builds(name):
  mod = MODULES[name]
  assert set(getattr(mod, "PUBLISHED", {})) <= set(mod.VARIANTS)
  assert ("smoke" in mod.VARIANTS) == (name not in NO_SMOKE)
  for variant in ("", *mod.VARIANTS):
    config = mod.get_config(variant)
    methods.validate(config)
    if variant != "smoke":  # a paper's variant: the official file or one line (no renderer)
      assert stand_in(config) in (None, False), variant
      if stand_in(config) is False and name not in NO_SMOKE:  # so are a study set's smoke runs
        assert stand_in(mod.get_config(f"{variant},smoke")) in (None, True), variant
  config = mod.get_config("" if name in NO_SMOKE else "smoke")
  if name not in NO_SMOKE:
    assert config.num_steps <= 300
    if config.dataset.name.startswith("dsprites"):
      assert config.dataset.source == "render"
    assert stand_in(config) in (None, True)
  methods.build(config, SHAPES[config.dataset.name])
