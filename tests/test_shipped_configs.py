"""Every shipped config (`experiments.aggregate.config_modules()`), every variant: it validates,
the published rows name variants, the smoke variant is short (on the renderer for dSprites), and
the module's smoke config (its default where it has none) builds its method."""
import pytest

from disentangle import methods
from disentangle.data.tfds import layouts
from experiments import aggregate

MODULES = {m.__name__.rpartition(".")[2]: m for m in aggregate.config_modules()
           if hasattr(m, "get_config")}
# Image shapes of the datasets the configs name (the TFDS layouts', and those served by files).
SHAPES = {**{name: layout.image_shape for name, layout in layouts.LAYOUTS.items()},
          "chairs": (64, 64, 1), "dsprites_unfair": (64, 64, 1)}
NO_SMOKE = {"smallnorb_betavae"}  # no offline stand-in of smallNORB: its default config builds


def test_the_modules_are_the_experiments():
  assert len(MODULES) >= 21 and {"shapes3d_betavae", "smallnorb_betavae"} <= set(MODULES)
  assert NO_SMOKE <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_variant_validates_and_the_smoke_config_builds(name):
  mod = MODULES[name]
  assert set(getattr(mod, "PUBLISHED", {})) <= set(mod.VARIANTS)
  assert ("smoke" in mod.VARIANTS) == (name not in NO_SMOKE)
  for variant in ("", *mod.VARIANTS):
    methods.validate(mod.get_config(variant))
  config = mod.get_config("" if name in NO_SMOKE else "smoke")
  if name not in NO_SMOKE:
    assert config.num_steps <= 300
    if config.dataset.name.startswith("dsprites"):
      assert config.dataset.source == "render"
  methods.build(config, SHAPES[config.dataset.name])
