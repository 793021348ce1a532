"""The version of the package, its one home: ``disentangle.__version__``, read by setup.py as text
and recorded in every run's ``environment.json`` (`disentangle.backend.describe`)."""

__version__ = "0.1.0"
