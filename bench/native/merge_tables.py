#!/usr/bin/env python3
"""Merges two outputs of manycl_native_conv_bench (e.g. 1 thread and 2 threads) into one
Markdown table with both timings per layer: merge_tables.py run1.md run2.md"""
import sys


def rows(path):
    out = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) >= 7 and cells[0] in ('resnet50', 'mobilenetv2', 'yolov3'):
            net, layer, prec, thr, ours, peer, ratio = cells[:7]
            out[(net, layer, prec)] = (thr, ours, peer, ratio)
    return out


def main():
    a, b = rows(sys.argv[1]), rows(sys.argv[2])
    ta = next(iter(a.values()))[0] if a else '?'
    tb = next(iter(b.values()))[0] if b else '?'
    print(f'| net | layer | prec | {ta}T ManyCL ms | {ta}T oneDNN ms | {ta}T ratio '
          f'| {tb}T ManyCL ms | {tb}T oneDNN ms | {tb}T ratio |')
    print('|---|---|---|---:|---:|---:|---:|---:|---:|')
    for key, (_, o1, p1, r1) in a.items():
        _, o2, p2, r2 = b.get(key, ('', '', '', ''))
        print(f'| {key[0]} | {key[1]} | {key[2]} | {o1} | {p1} | {r1} | {o2} | {p2} | {r2} |')


if __name__ == '__main__':
    main()
