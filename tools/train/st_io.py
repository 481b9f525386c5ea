"""safetensors files: through the `safetensors` package (always, on the GPU machine); a minimal
reader/writer of the same format only when the package is missing (the local --dry-run)."""
import json
import struct

import torch

try:
    from safetensors.torch import load_file as _load_file, save_file as _save_file
    HAVE_SAFETENSORS = True
except ImportError:  # the development machine: no safetensors package
    HAVE_SAFETENSORS = False

_DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}


def save(tensors, path):
    """tensors: {name: tensor}; written contiguous, on the CPU, with metadata format=pt."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    if HAVE_SAFETENSORS:
        _save_file(tensors, path, metadata={"format": "pt"})
        return
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype in (torch.bfloat16, torch.float16) \
            else t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    if HAVE_SAFETENSORS:
        return _load_file(path)
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] in ("BF16", "F16"):
            t = torch.from_numpy(np.frombuffer(data[b:e], dtype=np.int16).copy())
            t = t.view(torch.bfloat16 if info["dtype"] == "BF16" else torch.float16)
        else:
            t = torch.from_numpy(np.frombuffer(data[b:e], dtype=np.float32).copy())
        out[name] = t.reshape(info["shape"])
    return out
