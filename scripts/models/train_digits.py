#!/usr/bin/python3
"""Trains the small CNN digit classifier bundled in examples/models/digits and exports it.

Data: the 8x8 grayscale digits data set that ships with Debian's python3-sklearn
(sklearn.datasets.load_digits, 1797 images, pixel values 0..16), scaled to [0, 1] (x / 16),
split 80/20 stratified with a fixed seed. Network (PyTorch, Debian's python3-torch):

    input [1,1,8,8] -> Conv 8x3x3 pad 1 -> Relu -> Conv 16x3x3 pad 1 -> Relu -> MaxPool 2x2
    -> Flatten [1,256] -> Gemm 64 -> Relu -> Gemm 10 -> logits [1,10]

Training is deterministic (fixed seeds, deterministic algorithms, one thread by default).
Writes into OUT_DIR (default examples/models/digits):

    model.onnx              opset 13, static shapes, batch 1, input "input" NCHW [1,1,8,8] float32,
                            output "logits" [1,10] float32
    test_inputs.npy         held-out test set, [N,1,8,8] float32, already scaled to [0,1]
    test_labels.npy         [N] int64
    reference_logits.npy    PyTorch's logits for the test set, [N,10] float32
    sample_input.npy        test sample 0 alone, [1,1,8,8] float32 (a ready `kann run --input`)
    meta.json               accuracy, split, architecture, versions and the exact command

If ONNX Runtime with its quantization tool is available in the venv (scripts/setup-venv.sh),
it then runs scripts/models/quantize_digits.py in the venv, which adds model_int8.onnx (QDQ,
INT8) and reference_logits_int8.npy and records them in meta.json.

Usage: scripts/models/train_digits.py [--out-dir DIR] [--epochs N] [--threads N] [--no-int8]
"""
import argparse
import hashlib
import json
import os
import random
import shlex
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEED = 20261122


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out-dir", default=os.path.join(ROOT, "examples", "models", "digits"))
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--no-int8", action="store_true", help="skip the QDQ INT8 model")
    p.add_argument("--venv", default=os.path.join(ROOT, ".venv"),
                   help="venv with onnxruntime for the INT8 model and the ORT check")
    return p.parse_args()


def build_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


def main():
    args = parse_args()
    t_start = time.time()
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    torch.use_deterministic_algorithms(True)

    digits = load_digits()
    x = (digits.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=args.seed % (2**32), stratify=y)
    x_test = np.ascontiguousarray(x_test, dtype=np.float32)

    model = build_model(torch)
    batch = 64
    steps = args.epochs * ((len(x_train) + batch - 1) // batch)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(xt), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        if epoch % 5 == 4 or epoch == args.epochs - 1:
            print(f"train_digits: epoch {epoch + 1}/{args.epochs} loss {total / len(xt):.4f}",
                  flush=True)
    train_s = time.time() - t_start

    model.eval()
    with torch.no_grad():
        # One sample at a time, as the batch-1 ONNX model runs.
        logits = np.concatenate([model(torch.from_numpy(x_test[i:i + 1])).numpy()
                                 for i in range(len(x_test))]).astype(np.float32)
        train_acc = float((model(xt).argmax(1).numpy() == y_train).mean())
    pred = logits.argmax(1)
    correct = int((pred == y_test).sum())
    accuracy = correct / len(y_test)
    top2 = np.sort(logits, axis=1)[:, -2:]
    min_margin = float((top2[:, 1] - top2[:, 0]).min())

    os.makedirs(args.out_dir, exist_ok=True)
    onnx_path = os.path.join(args.out_dir, "model.onnx")
    dummy = torch.from_numpy(x_test[:1])
    torch.onnx.export(model, dummy, onnx_path, opset_version=13, input_names=["input"],
                      output_names=["logits"], do_constant_folding=True)
    import onnx
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m, full_check=True)
    m.doc_string = ("ManyCL digits classifier (sklearn digits 8x8, x/16), trained by "
                    "scripts/models/train_digits.py")
    onnx.save(m, onnx_path)
    np.save(os.path.join(args.out_dir, "test_inputs.npy"), x_test)
    np.save(os.path.join(args.out_dir, "test_labels.npy"), y_test)
    np.save(os.path.join(args.out_dir, "reference_logits.npy"), logits)
    np.save(os.path.join(args.out_dir, "sample_input.npy"), np.ascontiguousarray(x_test[:1]))

    rel_script = os.path.relpath(os.path.abspath(__file__), ROOT)
    argv = [rel_script] + [a if not os.path.isabs(a) else os.path.relpath(a, ROOT)
                           for a in sys.argv[1:]]
    meta = {
        "model": "model.onnx",
        "description": "CNN digit classifier, sklearn digits data set (8x8 grayscale)",
        "command": " ".join(shlex.quote(a) for a in argv),
        "data_set": "sklearn.datasets.load_digits (Debian python3-sklearn)",
        "preprocessing": "pixels (0..16) / 16 -> float32 in [0,1], NCHW [1,1,8,8]; "
                         "test_inputs.npy is already preprocessed",
        "split": {"test_size": 0.2, "stratify": True, "random_state": args.seed % (2**32),
                  "n_train": int(len(y_train)), "n_test": int(len(y_test))},
        "architecture": "Conv(8,3x3,pad1)-Relu-Conv(16,3x3,pad1)-Relu-MaxPool(2)-Flatten-"
                        "Gemm(64)-Relu-Gemm(10)",
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "input": {"name": "input", "shape": [1, 1, 8, 8], "dtype": "float32"},
        "output": {"name": "logits", "shape": [1, 10], "dtype": "float32"},
        "opset": 13,
        "training": {"epochs": args.epochs, "batch": batch, "optimizer": "AdamW lr 3e-3 wd 1e-2, one-cycle",
                     "seed": args.seed, "threads": args.threads,
                     "train_accuracy": round(train_acc, 6), "seconds": round(train_s, 1)},
        "framework": f"PyTorch {torch.__version__}",
        "accuracy": accuracy,
        "correct": correct,
        "n_test": int(len(y_test)),
        "min_top1_top2_margin": round(min_margin, 6),
        "sample": {"file": "sample_input.npy", "test_index": 0, "label": int(y_test[0]),
                   "predicted": int(pred[0]),
                   "reference_logits": [round(float(v), 6) for v in logits[0]]},
        "files": {},
    }
    print(f"train_digits: test accuracy {accuracy:.6f} ({correct}/{len(y_test)}), "
          f"train accuracy {train_acc:.6f}, min top-1/top-2 logit margin {min_margin:.4f}, "
          f"{train_s:.1f} s")

    meta_path = os.path.join(args.out_dir, "meta.json")
    write_meta(meta_path, meta, args.out_dir)

    venv_python = os.path.join(args.venv, "bin", "python")
    quant = os.path.join(HERE, "quantize_digits.py")
    if args.no_int8:
        meta["int8"] = {"skipped": "--no-int8"}
    elif not ort_available(venv_python):
        meta["int8"] = {"skipped": "ONNX Runtime's quantization tool is not available in "
                        f"{os.path.relpath(args.venv, ROOT)} (run scripts/setup-venv.sh)"}
        print("train_digits: " + meta["int8"]["skipped"])
    else:
        # The venv also checks that ONNX Runtime agrees with PyTorch on the float model and
        # adds the INT8 entries to meta.json.
        write_meta(meta_path, meta, args.out_dir)
        subprocess.run([venv_python, quant, "--dir", args.out_dir, "--threads",
                        str(args.threads)], check=True)
        with open(meta_path) as f:
            meta = json.load(f)
    write_meta(meta_path, meta, args.out_dir)
    total = sum(os.path.getsize(os.path.join(args.out_dir, f)) for f in os.listdir(args.out_dir))
    print(f"train_digits: wrote {args.out_dir} ({total / 1024:.1f} KiB), "
          f"{time.time() - t_start:.1f} s in all")


def ort_available(venv_python):
    if not os.path.exists(venv_python):
        return False
    r = subprocess.run([venv_python, "-c", "import onnxruntime.quantization"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def write_meta(path, meta, out_dir):
    files = {}
    for f in sorted(os.listdir(out_dir)):
        if f.endswith((".onnx", ".npy")):
            with open(os.path.join(out_dir, f), "rb") as fh:
                files[f] = {"bytes": os.path.getsize(os.path.join(out_dir, f)),
                            "sha256": hashlib.sha256(fh.read()).hexdigest()}
    meta["files"] = files
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
