#!/usr/bin/env python3
"""Writes a copy of a model config folder's config.json cut to its first LAYERS layers (and its
layer_types list with it), for timing a few layers of a model too large for the GPU at hand.
   tools/device/cut_config.py CONFIG_DIR LAYERS OUT_DIR"""
import json
import os
import sys

src, layers, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = json.load(open(os.path.join(src, "config.json")))
c["num_hidden_layers"] = layers
if "layer_types" in c:
    c["layer_types"] = c["layer_types"][:layers]
os.makedirs(out, exist_ok=True)
json.dump(c, open(os.path.join(out, "config.json"), "w"), indent=1)
