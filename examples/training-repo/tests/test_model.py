"""The repository's own tests (fp8check adds the training checks of the declared models)."""

from mymodel.model import batches, build


def test_the_model_maps_inputs_to_class_logits():
    x, y = batches(1)[0]
    assert build()(x).shape == (32, 32) and y.max() < 32
