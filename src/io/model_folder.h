// What a `--model` path must be, checked before anything reads from it, with the usual mistakes
// named and the path to pass instead:
//
//  * a `.gguf` file, or a folder whose weights are only `.gguf` files: GGUF is not supported; pass
//    the Hugging Face folder of the model (config.json + *.safetensors);
//  * a Hugging Face cache folder (`models--Org--Name`, its `snapshots/`, or the hub root
//    `~/.cache/huggingface/hub`): the model is in `snapshots/<hash>/`; the message lists those
//    that hold a config.json (at most 8);
//  * a file (e.g. config.json or a .safetensors shard): pass the folder that holds it;
//  * a path that does not exist.
//
// Only stat() and directory listings: no file is opened. load_model_config() and Tokenizer::load()
// call it first, so every command that opens a model folder explains these the same way.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace syv {

// Ok when `path` is a folder that is none of the above (it may still lack config.json or the
// tokenizer: the readers of those files say so). Messages start with the path.
Status check_model_folder(const std::string& path);

// The model folders inside a Hugging Face cache path: `path/snapshots/<hash>` for a
// `models--Org--Name` folder, `path/<hash>` for a `snapshots` folder, and
// `path/models--*/snapshots/<hash>` for the hub root; only those holding a config.json, sorted.
// Empty when `path` is not a cache folder.
std::vector<std::string> hf_cache_snapshots(const std::string& path);

}  // namespace syv
