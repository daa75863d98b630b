"""The network an FP16 deployment runs: BatchNormalization folded into the preceding Conv (as
kann's passes::fold_batchnorm does before it packs binary16 weights) and every float weight rounded to
binary16, kept in an FP32 ONNX model. ONNX Runtime on it (FP32 compute) is the reference for
kann's FP16 binaries that separates the weights' rounding (which any FP16 deployment has)
from the arithmetic (activation storage, kernels); `--float16` also writes ONNX Runtime's own
float16 conversion of that model (FP16 activations in ONNX Runtime).

    .venv/bin/python scripts/models/fp16_deployed.py MODEL.onnx --input X.npy --output-dir DIR
        [--float16 DIR16] [--rounded-activations DIR_ACT] [--save-model OUT.onnx]

Writes DIR/<output>.npy as reference.py does. Needs the test venv (onnxruntime).
"""
import argparse
import os
import re

import numpy as np
import onnx
from onnx import helper, numpy_helper


def fold_and_round(model):
    """BatchNormalization after a Conv whose output it alone reads: folded into the Conv's
    weights and bias; then all float initializers rounded to binary16 (stored as float32)."""
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    producer = {o: n for n in g.node for o in n.output}
    outputs = {o.name for o in g.output}
    dead = set()
    for bn in g.node:
        if bn.op_type != "BatchNormalization" or len(bn.output) != 1:
            continue
        conv = producer.get(bn.input[0])
        if (conv is None or conv.op_type != "Conv" or len(readers.get(conv.output[0], [])) != 1
                or conv.output[0] in outputs or not all(i in inits for i in bn.input[1:5])
                or conv.input[1] not in inits):
            continue
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        gamma, beta, mean, var = (inits[i].astype(np.float64) for i in bn.input[1:5])
        scale = gamma / np.sqrt(var + eps)
        w = inits[conv.input[1]].astype(np.float64)
        b = inits[conv.input[2]].astype(np.float64) if len(conv.input) > 2 and conv.input[2] \
            else np.zeros(w.shape[0])
        w = w * scale.reshape(-1, *([1] * (w.ndim - 1)))
        b = b * scale + beta - mean * scale
        wname, bname = conv.output[0] + ".w_folded", conv.output[0] + ".b_folded"
        inits[wname], inits[bname] = w.astype(np.float32), b.astype(np.float32)
        del conv.input[1:]
        conv.input.extend([wname, bname])
        conv.output[0] = bn.output[0]
        dead.add(id(bn))
    nodes = [n for n in g.node if id(n) not in dead]
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    del g.initializer[:]
    for name, a in inits.items():
        if name not in used:
            continue
        if a.dtype == np.float32:
            a = a.astype(np.float16).astype(np.float32)
        g.initializer.append(numpy_helper.from_array(a, name))
    return model


def round_activations(model):
    """Every node output (but shape arithmetic) rounded to binary16 and widened back: the
    deployed network with binary16 activation storage and float arithmetic, what kann's FP16
    binaries compute up to the order of their float sums."""
    g = model.graph
    shape_ops = {"Shape", "Constant", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast"}
    produced_by_shape = set()
    nodes = []
    for n in g.node:
        nodes.append(n)
        if n.op_type in shape_ops and (n.op_type in ("Shape", "Constant") or
                                       all(i in produced_by_shape or not i for i in n.input)):
            produced_by_shape.update(n.output)
            continue
        for k, out in enumerate(n.output):
            raw = out + ".f32"
            n.output[k] = raw
            half = out + ".f16"
            nodes.append(helper.make_node("Cast", [raw], [half], to=onnx.TensorProto.FLOAT16))
            nodes.append(helper.make_node("Cast", [half], [out], to=onnx.TensorProto.FLOAT))
    del g.node[:]
    g.node.extend(nodes)
    del g.value_info[:]
    return model


def run(model, feeds):
    import onnxruntime as ort
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def save(outputs, directory):
    os.makedirs(directory, exist_ok=True)
    for name, a in outputs.items():
        np.save(os.path.join(directory, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"), a)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--input", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--float16", metavar="DIR16")
    p.add_argument("--save-model")
    p.add_argument("--rounded-activations", metavar="DIR_ACT",
                   help="also ONNX Runtime on the deployed network with every activation "
                        "rounded to binary16 (round_activations)")
    args = p.parse_args()
    model = fold_and_round(onnx.load(args.model))
    if args.save_model:
        onnx.save(model, args.save_model)
    name = model.graph.input[0].name
    x = np.load(args.input).astype(np.float32)
    # kann's FP16 binaries take float32 inputs and store them as binary16.
    feeds = {name: x.astype(np.float16).astype(np.float32)}
    save(run(model, feeds), args.output_dir)
    if args.rounded_activations:
        import copy
        save(run(round_activations(copy.deepcopy(model)), feeds), args.rounded_activations)
    if args.float16:
        from onnxruntime.transformers import float16
        converted = float16.convert_float_to_float16(model, keep_io_types=True)
        save(run(converted, feeds), args.float16)


if __name__ == "__main__":
    main()
