"""Writes tests/fixtures/tiny/calibration_sample.txt: text from the tiny models' TRAIN split, for
`syv quantize --calibration-file` (GPTQ's calibration inputs; docs/performance.md "CPU: weight
formats' quality"). Calibrating on the held-out text the quality is then measured on would flatter
the result, so only train-split files are taken.

A file is taken when this machine has a Python source whose content (sha1) is that of a train
entry of the committed run's corpus list (tools/train/corpus_files-2026-12-01.tsv.gz: split, bytes,
sha1, path) and no held-out entry's; files are taken in sha1 order, skipping any holding added-token
text (as eval.sample_text does), each cut to its first --file-bytes at a line end (more files, more
kinds of code), joined by newlines, up to --bytes. Standard library only.

    python3 tools/train/calibration_sample.py [--roots /usr/lib/python3 ...] [--bytes 98304] \
        --out tests/fixtures/tiny/calibration_sample.txt
"""
import argparse
import glob
import gzip
import hashlib
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ADDED_TOKEN_TEXT = ("<|", "|>", "<think>", "</think>", "<tool_")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus_files-2026-12-01.tsv.gz"))
    ap.add_argument("--roots", nargs="*", default=sorted(glob.glob("/usr/lib/python3*")))
    ap.add_argument("--bytes", type=int, default=96 * 1024)
    ap.add_argument("--file-bytes", type=int, default=6 * 1024)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    train, heldout = set(), set()
    with gzip.open(a.corpus, "rt", encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            split, _, sha1, _ = line.rstrip("\n").split("\t")
            (train if split == "train" else heldout).add(sha1)
    train -= heldout

    found = {}
    for root in a.roots:
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for n in sorted(names):
                if not n.endswith(".py"):
                    continue
                try:
                    data = open(os.path.join(d, n), "rb").read()
                except OSError:
                    continue
                sha1 = hashlib.sha1(data).hexdigest()
                if sha1 in train and sha1 not in found:
                    found[sha1] = data

    parts, size = [], 0
    for sha1 in sorted(found):
        try:
            doc = found[sha1].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if any(s in doc for s in ADDED_TOKEN_TEXT):
            continue
        if len(doc.encode()) > a.file_bytes:
            cut = doc.encode()[: a.file_bytes].decode("utf-8", errors="ignore")
            doc = cut[: cut.rfind("\n") + 1] if "\n" in cut else cut
        n = len(doc.encode())
        if size + n + 1 > a.bytes:
            continue
        parts.append(doc)
        size += n + 1
    with open(a.out, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(parts))
    print(f"{a.out}: {len(parts)} train-split files of {len(found)} found, {size} bytes")


if __name__ == "__main__":
    main()
