"""How much of a model's FP16 error is binary16 itself: ONNX Runtime in FP32 on the model with
its float weights rounded to binary16 (all of them, then one group of layers at a time), and
ONNX Runtime's own float16 conversion, each against the FP32 model, with the test bar of
tests/kann/cnn_models (|diff| <= 2e-2 + 2e-2 * |ref|; "worst/tol" > 1 fails it).

    .venv/bin/python scripts/models/fp16_sensitivity.py build/models/deeplabv3_mobilenet.onnx

The weights are rounded as the model stores them: a BatchNormalization's parameters apart from
its convolution's, which overstates what an FP16 deployment loses (kann folds them in FP32
first): fp16_deployed.py gives the deployed network, used for docs/kann.md (the DeepLabV3
FP16 tolerance). Needs the test venv (onnxruntime).
"""
import collections
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def rounded_weights(path, names=None):
    model = onnx.load(path)
    for i, t in enumerate(model.graph.initializer):
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32 and (names is None or t.name in names):
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(a.astype(np.float16).astype(np.float32), t.name))
    return model


def main(path):
    model = onnx.load(path)
    name = model.graph.input[0].name
    input_path = path[:-len(".onnx")] + ".input.npy"
    feeds = {name: np.load(input_path).astype(np.float32)}
    reference = run(model, feeds)

    def report(tag, y):
        d = np.abs(y - reference)
        ratio = d / (2e-2 + 2e-2 * np.abs(reference))
        print(f"{tag:44s} max |diff| {d.max():.4f} ({d.max() / np.abs(reference).max():.2%} of "
              f"the range)  worst/tol {ratio.max():.2f}  over the bar {int((ratio > 1).sum())}")

    report("all weights binary16, FP32 compute", run(rounded_weights(path), feeds))
    report("the input binary16 only", run(model, {name: feeds[name].astype(np.float16)
                                                  .astype(np.float32)}))
    try:
        from onnxruntime.transformers import float16
        converted = float16.convert_float_to_float16(onnx.load(path), keep_io_types=True)
        report("ONNX Runtime float16 model", run(converted, feeds))
    except Exception as e:  # the converter is optional
        print(f"(ONNX Runtime's float16 converter: {e})")
    # Layer groups: the module path of torchvision's exports (net.backbone.3.*, ...).
    groups = collections.OrderedDict()
    for t in model.graph.initializer:
        m = re.match(r"(?:net\.)?((?:backbone|features|classifier|layer)\.?\d*(?:\.convs\.\d+|"
                     r"\.project)?)", t.name)
        groups.setdefault(m.group(1) if m else "other", set()).add(t.name)
    for group, names in groups.items():
        report(f"  weights of {group} only", run(rounded_weights(path, names), feeds))


if __name__ == "__main__":
    main(sys.argv[1])
