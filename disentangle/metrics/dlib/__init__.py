"""disentanglement_lib's metric suite (Locatello et al. 2019)."""
