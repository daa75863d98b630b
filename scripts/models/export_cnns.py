#!/usr/bin/python3
"""Exports standard CNNs with random weights to ONNX, for kann's tests and benchmarks.

  scripts/models/export_cnns.py [--out-dir build/models] [--only NAME]... [--list]
                                [--threads N] [--fold-batchnorm] [--verify]

Models (batch 1, static shapes, opset 13, float32, input "input" NCHW):
  resnet18, resnet50, mobilenetv2, squeezenet1_1   torchvision (Debian python3-torchvision),
                                                   weights=None, [1,3,224,224] -> "output" [1,1000]
  yolov3_416    Darknet-53 backbone + YOLOv3 head (written here: torchvision has no YOLO),
                [1,3,416,416] -> "yolo_13" [1,255,13,13], "yolo_26" [1,255,26,26],
                "yolo_52" [1,255,52,52] (raw head convolutions; no box decoding)
  yolov3_tiny   YOLOv3-tiny, [1,3,416,416] -> "yolo_13" [1,255,13,13], "yolo_26" [1,255,26,26]

Weights are PyTorch's default random initialization with a fixed seed (the same for every
model, so `--only` reproduces a full run); BatchNorm scales and shifts are drawn uniformly from
[0.5,1.5] and [-0.2,0.2], and BatchNorm statistics are calibrated on random inputs (running
mean/var from one batch of 2 in training mode; YOLOs at 192x192) so that activations
keep a sane range through the depth of the random network (no FP16 overflow, meaningful INT8
ranges).
The ONNX graphs keep their BatchNormalization nodes (folding them is kann's job);
--fold-batchnorm lets PyTorch fold them into the convolutions instead.

For each model NAME, OUT_DIR gets:
  NAME.onnx            checked with onnx.checker (full check, with shape inference)
  NAME.input.npy       a fixed random input (classifiers: ImageNet-normalized uniform noise;
                       YOLO: uniform [0,1) like a darknet image)
  NAME.torch/OUT.npy   PyTorch's output OUT for that input (one file per network output, the
                       `kann run --output-dir` convention)
  manifest.json        per model: file, bytes, parameter count, inputs/outputs, seconds and,
                       with --verify, the ONNX Runtime comparison
With --verify (needs the venv, scripts/setup-venv.sh) it also runs NAME.onnx with ONNX
Runtime (scripts/models/reference.py) into NAME.ort/OUT.npy and prints the max abs diff with
PyTorch's outputs; the exit status is 1 when one exceeds 1e-3 relative to max |output|.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEED = 20261122
VERIFY_RTOL = 1e-3


def yolo_modules(torch):
    nn = torch.nn

    class ConvBN(nn.Sequential):
        """Darknet convolutional block: conv (no bias) - BatchNorm - LeakyReLU(0.1)."""

        def __init__(self, cin, cout, k, stride=1):
            super().__init__(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(ConvBN(c, c // 2, 1), ConvBN(c // 2, c, 3))

        def forward(self, x):
            return x + self.body(x)

    class Darknet53(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = ConvBN(3, 32, 3)
            stages, cin = [], 32
            for cout, blocks in ((64, 1), (128, 2), (256, 8), (512, 8), (1024, 4)):
                stages.append(nn.Sequential(ConvBN(cin, cout, 3, 2),
                                            *[Residual(cout) for _ in range(blocks)]))
                cin = cout
            self.stages = nn.ModuleList(stages)

        def forward(self, x):
            x = self.stem(x)
            routes = []
            for s in self.stages:
                x = s(x)
                routes.append(x)
            return routes[2], routes[3], routes[4]  # strides 8, 16, 32

    def five(cin, c):
        return nn.Sequential(ConvBN(cin, c, 1), ConvBN(c, 2 * c, 3), ConvBN(2 * c, c, 1),
                             ConvBN(c, 2 * c, 3), ConvBN(2 * c, c, 1))

    def head(c, anchors_x_classes=255):
        return nn.Sequential(ConvBN(c, 2 * c, 3), nn.Conv2d(2 * c, anchors_x_classes, 1))

    class YoloV3(nn.Module):
        """YOLOv3 (yolov3.cfg): Darknet-53, three detection scales, 80 classes x 3 anchors."""

        def __init__(self):
            super().__init__()
            self.backbone = Darknet53()
            self.block1, self.out1 = five(1024, 512), head(512)
            self.lat1 = ConvBN(512, 256, 1)
            self.block2, self.out2 = five(256 + 512, 256), head(256)
            self.lat2 = ConvBN(256, 128, 1)
            self.block3, self.out3 = five(128 + 256, 128), head(128)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")

        def forward(self, x):
            r36, r61, x = self.backbone(x)
            x = self.block1(x)
            y1 = self.out1(x)
            x = self.block2(torch.cat([self.up(self.lat1(x)), r61], 1))
            y2 = self.out2(x)
            x = self.block3(torch.cat([self.up(self.lat2(x)), r36], 1))
            y3 = self.out3(x)
            return y1, y2, y3

    class MaxPoolS1(torch.autograd.Function):
        """Darknet's 2x2 stride-1 max pool: pads one row/column at the bottom/right that never
        wins. Exported as one ONNX MaxPool with asymmetric pads [0,0,1,1]; computed in PyTorch
        with edge replication, which gives the same result for a 2x2 window."""

        @staticmethod
        def forward(ctx, x):
            return nn.functional.max_pool2d(nn.functional.pad(x, (0, 1, 0, 1), mode="replicate"),
                                            2, 1)

        @staticmethod
        def symbolic(g, x):
            return g.op("MaxPool", x, kernel_shape_i=[2, 2], strides_i=[1, 1],
                        pads_i=[0, 0, 1, 1])

    class PoolS1(nn.Module):
        def forward(self, x):
            return MaxPoolS1.apply(x)

    class YoloV3Tiny(nn.Module):
        """YOLOv3-tiny (yolov3-tiny.cfg): two detection scales, 80 classes x 3 anchors."""

        def __init__(self):
            super().__init__()
            mp = nn.MaxPool2d(2, 2)
            self.features8 = nn.Sequential(ConvBN(3, 16, 3), mp, ConvBN(16, 32, 3), mp,
                                           ConvBN(32, 64, 3), mp, ConvBN(64, 128, 3), mp,
                                           ConvBN(128, 256, 3))
            self.features13 = nn.Sequential(mp, ConvBN(256, 512, 3), PoolS1(),
                                            ConvBN(512, 1024, 3), ConvBN(1024, 256, 1))
            self.out1 = nn.Sequential(ConvBN(256, 512, 3), nn.Conv2d(512, 255, 1))
            self.lat = ConvBN(256, 128, 1)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.out2 = nn.Sequential(ConvBN(128 + 256, 256, 3), nn.Conv2d(256, 255, 1))

        def forward(self, x):
            r8 = self.features8(x)
            r13 = self.features13(r8)
            y1 = self.out1(r13)
            y2 = self.out2(torch.cat([self.up(self.lat(r13)), r8], 1))
            return y1, y2

    return YoloV3, YoloV3Tiny


def torchvision_model(name):
    def build(torch):
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return build


def torchvision_kwargs_model(name, **kwargs):
    def build(torch):
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kwargs)
    return build


def deeplabv3_mobilenet():
    def build(torch):
        import torchvision

        class Head(torch.nn.Module):  # the segmentation dict's "out" tensor
            def __init__(self):
                super().__init__()
                self.net = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
                    weights=None, weights_backbone=None, aux_loss=False)

            def forward(self, x):
                return self.net(x)["out"]
        return Head()
    return build


def unet_model():
    """A small UNet: 3 levels, transposed-convolution upsampling, skip concatenations."""
    def build(torch):
        nn = torch.nn

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                                 nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1),
                                 nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

        class UNet(nn.Module):
            def __init__(self, c=16, classes=4):
                super().__init__()
                self.e1, self.e2, self.e3 = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
                self.pool = nn.MaxPool2d(2)
                self.mid = block(4 * c, 8 * c)
                self.u3 = nn.ConvTranspose2d(8 * c, 4 * c, 2, stride=2)
                self.d3 = block(8 * c, 4 * c)
                self.u2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
                self.d2 = block(4 * c, 2 * c)
                self.u1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
                self.d1 = block(2 * c, c)
                self.head = nn.Conv2d(c, classes, 1)

            def forward(self, x):
                e1 = self.e1(x)
                e2 = self.e2(self.pool(e1))
                e3 = self.e3(self.pool(e2))
                m = self.mid(self.pool(e3))
                d3 = self.d3(torch.cat([self.u3(m), e3], 1))
                d2 = self.d2(torch.cat([self.u2(d3), e2], 1))
                d1 = self.d1(torch.cat([self.u1(d2), e1], 1))
                return self.head(d1)
        return UNet()
    return build


def yolo_model(which):
    def build(torch):
        return yolo_modules(torch)[which]()
    return build


# name: (builder, input shape, output names, input kind, description)
MODELS = {
    "resnet18": (torchvision_model("resnet18"), [1, 3, 224, 224], ["output"], "imagenet",
                 "torchvision ResNet-18"),
    "resnet50": (torchvision_model("resnet50"), [1, 3, 224, 224], ["output"], "imagenet",
                 "torchvision ResNet-50"),
    "mobilenetv2": (torchvision_model("mobilenet_v2"), [1, 3, 224, 224], ["output"], "imagenet",
                    "torchvision MobileNetV2"),
    "squeezenet1_1": (torchvision_model("squeezenet1_1"), [1, 3, 224, 224], ["output"],
                      "imagenet", "torchvision SqueezeNet 1.1"),
    "yolov3_416": (yolo_model(0), [1, 3, 416, 416], ["yolo_13", "yolo_26", "yolo_52"], "image",
                   "YOLOv3-416: Darknet-53 + 3-scale head, no box decoding"),
    "yolov3_tiny": (yolo_model(1), [1, 3, 416, 416], ["yolo_13", "yolo_26"], "image",
                    "YOLOv3-tiny 416, no box decoding"),
    # Families of the model-coverage issue (docs/kann.md, "Model coverage").
    "mobilenetv3_small": (torchvision_model("mobilenet_v3_small"), [1, 3, 224, 224], ["output"],
                          "imagenet", "torchvision MobileNetV3-Small (hard-swish, SE gates)"),
    "mobilenetv3_large": (torchvision_model("mobilenet_v3_large"), [1, 3, 224, 224], ["output"],
                          "imagenet", "torchvision MobileNetV3-Large"),
    "efficientnet_b0": (torchvision_model("efficientnet_b0"), [1, 3, 224, 224], ["output"],
                        "imagenet", "torchvision EfficientNet-B0 (SiLU, SE gates)"),
    "shufflenetv2": (torchvision_model("shufflenet_v2_x1_0"), [1, 3, 224, 224], ["output"],
                     "imagenet", "torchvision ShuffleNetV2 x1.0 (channel shuffle, split)"),
    "regnet_y_400mf": (torchvision_model("regnet_y_400mf"), [1, 3, 224, 224], ["output"],
                       "imagenet", "torchvision RegNetY-400MF (grouped convolutions, SE)"),
    "densenet121": (torchvision_model("densenet121"), [1, 3, 224, 224], ["output"], "imagenet",
                    "torchvision DenseNet-121 (deep concatenations)"),
    "googlenet": (torchvision_kwargs_model("googlenet", aux_logits=False, init_weights=True),
                  [1, 3, 224, 224], ["output"], "imagenet", "torchvision GoogLeNet (Inception)"),
    "deeplabv3_mobilenet": (deeplabv3_mobilenet(), [1, 3, 256, 256], ["output"], "imagenet",
                            "torchvision DeepLabV3, MobileNetV3-Large backbone (dilated, ASPP)"),
    "unet": (unet_model(), [1, 3, 128, 128], ["output"], "image",
             "small UNet: transposed convolutions and skip concatenations"),
}


def make_input(torch, kind, shape, gen):
    x = torch.rand(shape, generator=gen)
    if kind == "imagenet":
        mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        x = (x - mean) / std
    return x.contiguous()


def calibrate_batchnorm(torch, model, kind, shape, gen, batches=1, batch=2):
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    with torch.no_grad():
        for m in bns:
            # Random affine parameters: BN folding is then not a no-op, and no two BN layers
            # share identical parameters (the exporter would deduplicate them into Identity).
            m.weight.uniform_(0.5, 1.5, generator=gen)
            m.bias.uniform_(-0.2, 0.2, generator=gen)
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
        model.train()
        # Fully convolutional YOLOs: calibrated at about half resolution, a multiple of their
        # stride 32 (a quarter of the cost; the per-channel statistics of noise inputs do not
        # depend on the image size).
        cshape = shape[1:] if kind != "image" else \
            [shape[1], shape[2] // 64 * 32, shape[3] // 64 * 32]
        for _ in range(batches):
            model(make_input(torch, kind, [batch] + cshape, gen))
    for m in bns:
        m.momentum = 0.1
    model.eval()
    return len(bns)


def inline_identities(onnx, m):
    """The exporter deduplicates equal parameters (e.g. zero-initialized biases) into one
    initializer plus Identity nodes; give each consumer its own initializer instead."""
    inits = {i.name: i for i in m.graph.initializer}
    keep = []
    for n in m.graph.node:
        if n.op_type == "Identity" and n.input[0] in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[n.input[0]])
            copy.name = n.output[0]
            m.graph.initializer.append(copy)
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)


def export_one(torch, onnx, name, out_dir, fold_bn):
    builder, shape, outputs, kind, desc = MODELS[name]
    t0 = time.time()
    torch.manual_seed(SEED)
    model = builder(torch)
    model.eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    t = {"build": time.time() - t0}
    n_bn = calibrate_batchnorm(torch, model, kind, shape, gen)
    t["calibrate"] = time.time() - t0 - sum(t.values())
    x = make_input(torch, kind, shape, torch.Generator().manual_seed(SEED + 2))
    with torch.no_grad():
        ys = model(x)
    t["forward"] = time.time() - t0 - sum(t.values())
    ys = ys if isinstance(ys, (tuple, list)) else (ys,)
    path = os.path.join(out_dir, name + ".onnx")
    mode = torch.onnx.TrainingMode.EVAL if fold_bn else torch.onnx.TrainingMode.PRESERVE
    with warnings.catch_warnings():
        # PRESERVE with an eval-mode model exports inference BatchNormalization; the exporter's
        # warnings about constant folding in training mode and missing shape inference for
        # prim::Constant do not apply (the checker's shape inference runs below).
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"],
                          output_names=outputs, do_constant_folding=True, training=mode)
    t["export"] = time.time() - t0 - sum(t.values())
    m = onnx.load(path)
    inline_identities(onnx, m)
    m.doc_string = f"ManyCL test model {name}: {desc}; random weights (seed {SEED}), " \
                   "made by scripts/models/export_cnns.py"
    onnx.save(m, path)
    onnx.checker.check_model(path, full_check=True)
    t["check"] = time.time() - t0 - sum(t.values())
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1

    def dims(v):
        return [d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in v.type.tensor_type.shape.dim]

    if "Identity" in ops:
        raise RuntimeError(f"{name}: the exporter left Identity nodes")
    static = all(isinstance(d, int) and d > 0 for v in list(m.graph.input) + list(m.graph.output)
                 for d in dims(v))
    if not static:
        raise RuntimeError(f"{name}: non-static shapes in the exported graph")
    np.save(os.path.join(out_dir, name + ".input.npy"), x.numpy())
    ref_dir = os.path.join(out_dir, name + ".torch")
    os.makedirs(ref_dir, exist_ok=True)
    for oname, y in zip(outputs, ys):
        np.save(os.path.join(ref_dir, oname + ".npy"), y.numpy())
    params = sum(int(np.prod(i.dims)) for i in m.graph.initializer)
    entry = {
        "file": name + ".onnx", "description": desc, "bytes": os.path.getsize(path),
        "onnx_parameters": params,
        "torch_parameters": int(sum(p.numel() for p in model.parameters())),
        "batchnorm": "folded by PyTorch" if fold_bn else f"{n_bn} BatchNormalization nodes kept",
        "opset": 13, "seed": SEED,
        "input": {"name": "input", "shape": shape, "file": name + ".input.npy"},
        "outputs": [{"name": o, "shape": list(y.shape), "reference": f"{name}.torch/{o}.npy"}
                    for o, y in zip(outputs, ys)],
        "operators": dict(sorted(ops.items())),
        "framework": f"PyTorch {torch.__version__}",
        "seconds": round(time.time() - t0, 1),
        "seconds_by_step": {k: round(v, 1) for k, v in t.items()},
    }
    print(f"export_cnns: {name}: {entry['bytes'] / 2**20:.1f} MiB, {params / 1e6:.2f} M "
          f"parameters, {len(m.graph.node)} nodes, outputs "
          f"{', '.join(f'{o}{list(y.shape)}' for o, y in zip(outputs, ys))}, "
          f"{entry['seconds']} s ({', '.join(f'{k} {v:.1f}' for k, v in t.items())})",
          flush=True)
    return entry


def verify_one(name, out_dir, threads, venv_python):
    ort_dir = os.path.join(out_dir, name + ".ort")
    subprocess.run([venv_python, os.path.join(HERE, "reference.py"),
                    os.path.join(out_dir, name + ".onnx"),
                    "--input", os.path.join(out_dir, name + ".input.npy"),
                    "--output-dir", ort_dir, "--threads", str(threads), "--quiet"], check=True)
    result, ok = {}, True
    for f in sorted(os.listdir(os.path.join(out_dir, name + ".torch"))):
        ref = np.load(os.path.join(out_dir, name + ".torch", f)).astype(np.float64)
        got = np.load(os.path.join(ort_dir, f)).astype(np.float64)
        diff = float(np.abs(got - ref).max())
        scale = float(np.abs(ref).max())
        result[f[:-4]] = {"max_abs_diff": diff, "max_abs_ref": scale}
        ok &= diff <= VERIFY_RTOL * scale
        print(f"export_cnns: {name}: ONNX Runtime vs PyTorch, {f[:-4]}: max abs diff {diff:.3g} "
              f"(max |ref| {scale:.3g})", flush=True)
    return result, ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--out-dir", default=os.path.join(ROOT, "build", "models"))
    p.add_argument("--only", action="append", choices=sorted(MODELS), metavar="NAME")
    p.add_argument("--list", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fold-batchnorm", action="store_true")
    p.add_argument("--verify", action="store_true",
                   help="compare ONNX Runtime's outputs with PyTorch's (needs .venv)")
    p.add_argument("--venv", default=os.path.join(ROOT, ".venv"))
    args = p.parse_args()

    if args.list:
        for name, (_, shape, outputs, _, desc) in MODELS.items():
            print(f"{name:14s} input {shape} outputs {', '.join(outputs)}: {desc}")
        return
    venv_python = os.path.join(args.venv, "bin", "python")
    if args.verify and not os.path.exists(venv_python):
        sys.exit(f"export_cnns: --verify needs {venv_python}: run scripts/setup-venv.sh")

    import onnx
    import torch
    torch.set_num_threads(args.threads)
    os.makedirs(args.out_dir, exist_ok=True)
    manifest_path = os.path.join(args.out_dir, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    status = 0
    for name in args.only or list(MODELS):
        entry = export_one(torch, onnx, name, args.out_dir, args.fold_batchnorm)
        if args.verify:
            entry["onnxruntime_vs_torch"], ok = verify_one(name, args.out_dir, args.threads,
                                                           venv_python)
            if not ok:
                print(f"export_cnns: {name}: ONNX Runtime disagrees with PyTorch "
                      f"(> {VERIFY_RTOL} relative)", file=sys.stderr)
                status = 1
        manifest[name] = entry
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    sys.exit(status)


if __name__ == "__main__":
    main()
