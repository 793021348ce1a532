"""The datasets: loaders of the canonical files (MNIST, Fashion-MNIST, dSprites and its renderer,
DSpritesUnfair, CelebA, Chairs) and the synthetic stand-ins the tests use."""
