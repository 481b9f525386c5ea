#!/usr/bin/env python3
"""Untied copy of a tied model folder (no dependencies beyond the standard library):

    python3 tools/train/untie_embeddings.py models/tiny-dense /tmp/tiny-dense-untied

writes DST with lm_head.weight = a copy of model.embed_tokens.weight and tie_word_embeddings
false (same logits as SRC). Used to measure `syv quantize --lm-head` on the trained tiny models,
which tie their embeddings (docs/performance.md "CPU: weight formats' quality")."""
import json, struct, shutil, sys, os
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for name in os.listdir(src):
    if name != 'model.safetensors':
        shutil.copy(os.path.join(src, name), dst)
raw = open(os.path.join(src, 'model.safetensors'), 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + n]); data = raw[8 + n:]
meta = header.pop('__metadata__', None)
e = header['model.embed_tokens.weight']
b, t = e['data_offsets']
header['lm_head.weight'] = {'dtype': e['dtype'], 'shape': e['shape'], 'data_offsets': [len(data), len(data) + (t - b)]}
data = data + data[b:t]
if meta is not None: header['__metadata__'] = meta
hj = json.dumps(header, separators=(',', ':')).encode()
hj += b' ' * ((8 - len(hj) % 8) % 8)
open(os.path.join(dst, 'model.safetensors'), 'wb').write(struct.pack('<Q', len(hj)) + hj + data)
cfg = json.load(open(os.path.join(src, 'config.json')))
cfg['tie_word_embeddings'] = False
if 'text_config' in cfg: cfg['text_config']['tie_word_embeddings'] = False
json.dump(cfg, open(os.path.join(dst, 'config.json'), 'w'), indent=2)
