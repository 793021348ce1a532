"""TensorFlow Datasets without TensorFlow: the feature layouts (`layouts`), the reader by index
(`source`) and the project's own builders (`builders`, prepared by ``python -m disentangle.data.build``)."""
