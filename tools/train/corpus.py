"""The training text: Python source files (code and docstrings) of the packages installed on the
machine, split by a hash of the file path into train and held-out.

Selection, deterministic for a given file system:
  1. every *.py file under the roots (the interpreter's stdlib and site/dist-packages folders,
     /usr/lib/python3*), 64 B .. 512 KB, no __pycache__, each inode once;
  2. ordered by sha256(path); held-out = files whose hash bucket (first 8 hex digits mod 1000) is
     below k, the smallest k in 20, 40, 80, 160, 320 giving >= heldout_min bytes, then the first
     files in hash order up to heldout_max bytes;
  3. train = the other files in hash order up to train_max bytes;
  4. decoded as UTF-8 (files that are not are skipped); a file whose content (sha1) was already
     taken is skipped, held-out first, so no held-out text is also trained on.
"""
import glob
import hashlib
import os
import site
import sys
import sysconfig

MIN_BYTES, MAX_BYTES = 64, 512 * 1024


def default_roots():
    roots = set()
    for key in ("stdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(p)
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    roots.update(glob.glob("/usr/lib/python3*"))
    roots.update(glob.glob("/usr/local/lib/python3*"))
    roots.update(glob.glob(os.path.join(sys.prefix, "lib", "python3*")))
    out = sorted(os.path.realpath(r) for r in roots if os.path.isdir(r))
    # Drop roots inside other roots (walked anyway).
    return [r for r in out if not any(r != o and r.startswith(o + os.sep) for o in out)]


def list_files(roots):
    """(path, bytes) of every candidate file; a file reached twice (links, hard links, nested
    roots) counts once, under the first path in walk order."""
    seen, files = set(), []
    for root in roots:
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for n in sorted(names):
                if not n.endswith(".py"):
                    continue
                p = os.path.join(d, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
                if MIN_BYTES <= st.st_size <= MAX_BYTES:
                    files.append((p, st.st_size))
    return files


def _h(path):
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()


def build(roots, train_max, heldout_min, heldout_max, log):
    """Returns (train_docs, heldout_docs, records): docs are lists of strings in hash order;
    records [{split, path, bytes, sha1}] for every file taken."""
    files = sorted(list_files(roots), key=lambda f: _h(f[0]))
    total = sum(s for _, s in files)
    log(f"  {len(files)} .py files, {total / 1e6:.1f} MB under {len(roots)} roots")
    k = 20
    while True:
        held = [f for f in files if int(_h(f[0])[:8], 16) % 1000 < k]
        if sum(s for _, s in held) >= heldout_min or k >= 320:
            break
        k *= 2
    held_set = {p for p, _ in held}
    rest = [f for f in files if f[0] not in held_set]
    taken, records = set(), []

    def take(candidates, limit, split):
        docs, got = [], 0
        for p, _ in candidates:
            if got >= limit:
                break
            try:
                with open(p, "rb") as fh:
                    raw = fh.read()
                text = raw.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            digest = hashlib.sha1(raw).hexdigest()
            if digest in taken or not text.strip():
                continue
            taken.add(digest)
            docs.append(text)
            got += len(raw)
            records.append({"split": split, "path": p, "bytes": len(raw), "sha1": digest})
        return docs, got

    held_docs, held_bytes = take(held, heldout_max, "heldout")
    train_docs, train_bytes = take(rest, train_max, "train")
    if held_bytes < 2_000_000:
        log(f"  WARNING: only {held_bytes} held-out bytes (want >= 2 MB)")
    log(f"  held-out bucket < {k}/1000: {len(held_docs)} files, {held_bytes / 1e6:.2f} MB; "
        f"train {len(train_docs)} files, {train_bytes / 1e6:.2f} MB")
    return train_docs, held_docs, records, {"heldout_bucket_k": k, "files_seen": len(files),
                                            "bytes_seen": total, "train_bytes": train_bytes,
                                            "heldout_bytes": held_bytes,
                                            "train_files": len(train_docs),
                                            "heldout_files": len(held_docs), "roots": roots}


def write_file_list(records, path):
    """A gzip'd TSV: split, bytes, sha1, path (sorted by split then path)."""
    import gzip
    import io
    with gzip.GzipFile(path, "wb", mtime=0) as raw, \
            io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape") as f:
        f.write("split\tbytes\tsha1\tpath\n")
        for r in sorted(records, key=lambda r: (r["split"], r["path"])):
            f.write(f"{r['split']}\t{r['bytes']}\t{r['sha1']}\t{r['path']}\n")
