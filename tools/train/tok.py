"""The byte-level BPE tokenizer of the tiny models: trained with `tokenizers` on the train split,
written as a Hugging Face tokenizer.json + tokenizer_config.json shaped like Qwen3's (the same
NFC normalizer, Split regex + ByteLevel pre-tokenizer, ByteLevel decoder, the chat template and
the added tokens the template uses), so syv and transformers load it like any Qwen folder.

Ids: the BPE vocabulary first (256 byte symbols + merges), then the added tokens in ADDED order;
vocab_size - len(ADDED) BPE entries, so the models' vocab_size is exactly `vocab_size`.
"""
import json
import os

# Qwen3's tokenizer.json pipeline, verbatim (third_party/qwen3-tokenizer/tokenizer.json).
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
               "use_regex": False}
PIPELINE = {
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN_SPLIT}, "behavior": "Isolated",
         "invert": False}, dict(_BYTE_LEVEL)]},
    "post_processor": dict(_BYTE_LEVEL),
    "decoder": dict(_BYTE_LEVEL),
}
# The added tokens kept from Qwen3 (the chat template uses them); flags copied from its config.
ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
         "<tool_response>", "</tool_response>", "<think>", "</think>"]
EOT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"


def added_token_entries(template_config):
    """[{content, single_word, lstrip, rstrip, normalized, special}] for ADDED, flags from the Qwen3
    tokenizer_config.json's added_tokens_decoder (special defaults to the <|...|> form)."""
    by_content = {v["content"]: v for v in template_config.get("added_tokens_decoder", {}).values()}
    out = []
    for c in ADDED:
        src = by_content.get(c, {})
        out.append({"content": c, "single_word": bool(src.get("single_word", False)),
                    "lstrip": bool(src.get("lstrip", False)),
                    "rstrip": bool(src.get("rstrip", False)),
                    "normalized": bool(src.get("normalized", False)),
                    "special": bool(src.get("special", c.startswith("<|")))})
    return out


def train_bpe(texts, vocab_size, added, log):
    """A tokenizers.Tokenizer with the Qwen pipeline, BPE trained on `texts` (an iterable of
    strings), and the added tokens appended."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    from tokenizers import normalizers
    tok.normalizer = normalizers.NFC()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(added), min_frequency=2,
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer)
    n_model = tok.get_vocab_size(with_added_tokens=False)
    log(f"  BPE vocabulary {n_model} (asked {vocab_size - len(added)})")
    for a in added:
        t = AddedToken(a["content"], single_word=a["single_word"], lstrip=a["lstrip"],
                       rstrip=a["rstrip"], normalized=a["normalized"], special=a["special"])
        (tok.add_special_tokens if a["special"] else tok.add_tokens)([t])
    return tok


class HFTokenizer:
    """A saved tokenizer.json, reloaded with `tokenizers` (what every later stage encodes with)."""

    def __init__(self, path):
        from tokenizers import Tokenizer
        self.path = path
        self.tok = Tokenizer.from_file(path)

    def encode_batch(self, texts):
        fast = getattr(self.tok, "encode_batch_fast", None)
        encs = (fast or self.tok.encode_batch)(list(texts), add_special_tokens=False)
        return [e.ids for e in encs]

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)

    def token_to_id(self, s):
        return self.tok.token_to_id(s)

    def model_vocab_size(self):
        return self.tok.get_vocab_size(with_added_tokens=False)


def write_tokenizer_json(tok, path):
    """Saves `tok` (tokenizers.Tokenizer, or the dry run's BytesTokenizer) with Qwen3's exact
    normalizer / pre-tokenizer / post-processor / decoder entries."""
    if hasattr(tok, "to_json") and not hasattr(tok, "to_str"):
        j = tok.to_json()
    else:
        j = json.loads(tok.to_str())
    j.update(json.loads(json.dumps(PIPELINE)))
    order = ["version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
             "post_processor", "decoder", "model"]
    j = {k: j[k] for k in order if k in j} | {k: v for k, v in j.items() if k not in order}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=None, separators=(",", ":"))


def write_tokenizer_config(path, template_config, added_with_ids, max_len):
    """tokenizer_config.json: Qwen3's fields and chat template, with this tokenizer's ids."""
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                              "single_word", "special")}
            for a in added_with_ids},
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None,
        "chat_template": template_config["chat_template"],
        "clean_up_tokenization_spaces": False,
        "eos_token": IM_END,
        "errors": "replace",
        "model_max_length": max_len,
        "pad_token": EOT,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)


def added_ids(tok, added):
    out = []
    for a in added:
        i = tok.token_to_id(a["content"])
        assert i is not None, f"added token {a['content']} has no id"
        out.append(dict(a, id=i))
    return out


def save_folder_files(src_dir, dst_dir):
    """Copies tokenizer.json + tokenizer_config.json into a model folder."""
    import shutil
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(src_dir, name), os.path.join(dst_dir, name))
