"""Side information: named targets and attributes of a dataset (`supervision`), what a method
asks of a batch (`batch_spec`) and the labelled subsets of semi-supervised training (`labelled`)."""
