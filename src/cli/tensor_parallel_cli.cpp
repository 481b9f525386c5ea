#include "cli/tensor_parallel_cli.h"

#include <cstring>

#include "core/log.h"
#include "model/tensor_parallel.h"
#ifdef SYV_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_tp_group.h"
#endif

namespace syv::cli {

void add_tensor_parallel_arg(CLI::App& app, int& size) {
  app.add_option("--tensor-parallel-size", size,
                 "Split the model over N ranks (alias -tp N, as vLLM's): each holds 1/N of every\n"
                 "layer's attention heads and MLP rows and of the KV cache, the embedding and\n"
                 "lm_head whole; an all-reduce after each attention and MLP. On CUDA one GPU per\n"
                 "rank, devices 0..N-1 (CUDA_VISIBLE_DEVICES picks them), NCCL's all-reduce; on\n"
                 "the CPU N simulated ranks (tests; no faster). The MTP head is split like the\n"
                 "layers; the host tier keeps every rank's pages; CUDA graphs are captured on\n"
                 "every rank. Not yet with pre-quantized checkpoints. Default 1\n"
                 "(docs/configuration.md, \"Tensor parallelism\").")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

std::vector<std::string> expand_tensor_parallel_alias(int argc, const char* const* argv) {
  std::vector<std::string> out;
  bool literal = false;  // after "--"
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (literal || i == 0) {
      out.push_back(a);
      continue;
    }
    if (a == "--") literal = true;
    if (a == "-tp") {
      out.push_back("--tensor-parallel-size");
    } else if (a.rfind("-tp=", 0) == 0) {
      out.push_back("--tensor-parallel-size=" + a.substr(4));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

Result<TpRanks> make_tp_ranks(Backend& first, int size) {
  const std::string flag = "--tensor-parallel-size " + std::to_string(size);
  if (size < 1) return Status::Error(flag + ": expected >= 1");
  TpRanks ranks;
  ranks.size = size;
  ranks.backends.push_back(&first);
  if (size == 1) return ranks;
#ifdef SYV_HAVE_CUDA
  if (auto* gpu = dynamic_cast<CudaBackend*>(&first)) {
    const int devices = cuda_device_count();
    if (devices < size) {
      return Status::Error(flag + ": needs " + std::to_string(size) +
                           " CUDA devices (one per rank), this machine has " +
                           std::to_string(devices) + " visible (CUDA_VISIBLE_DEVICES)");
    }
    if (gpu->device() != 0)
      return Status::Error(flag + ": rank 0 must be CUDA device 0, found " +
                           std::to_string(gpu->device()));
    if (!nccl_available()) {
      return Status::Error(flag +
                           ": this syv was built without NCCL (CMake found no nccl.h), "
                           "which tensor parallelism on CUDA needs");
    }
    std::vector<CudaBackend*> gpus = {gpu};
    for (int r = 1; r < size; ++r) {
      std::unique_ptr<CudaBackend> b = make_cuda_backend(r);
      b->set_batch_invariant(gpu->batch_invariant());
      gpus.push_back(b.get());
      ranks.backends.push_back(b.get());
      ranks.owned.push_back(std::move(b));
    }
    first.make_current();  // make_cuda_backend(r) left device r current
    Result<std::unique_ptr<TpGroup>> group = make_nccl_tp_group(gpus);
    if (!group.ok()) return group.status().with_context(flag);
    ranks.group = std::move(group).value();
    return ranks;
  }
#endif
  if (first.device_facts().backend != "cpu") {
    return Status::Error(flag +
                         ": tensor parallelism runs on CUDA (NCCL) or simulated on the "
                         "CPU, not on backend " +
                         first.name());
  }
  for (int r = 1; r < size; ++r) {
    ranks.owned.push_back(make_cpu_backend());
    ranks.owned.back()->set_batch_invariant(first.batch_invariant());
    ranks.backends.push_back(ranks.owned.back().get());
  }
  return ranks;
}

Status check_tp_model(const ModelConfig& config, int size) {
  if (size == 1) return Status::Ok();
  Status st = check_tensor_parallel(config, size);
  if (!st.ok()) return st.with_context("--tensor-parallel-size " + std::to_string(size));
  return st;
}

Result<std::unique_ptr<Model>> load_tp_model(const PreparedModel& prepared, TpRanks& ranks,
                                             const LoadOptions& options) {
  if (ranks.size == 1) {
    SYV_LOG(INFO) << "tensor parallel: off (--tensor-parallel-size 1)";
    return load_prepared_model(prepared, *ranks.backends[0], options);
  }
  std::string names;
  for (Backend* b : ranks.backends) {
    names += (names.empty() ? "" : ", ") + b->name();
    // prepare_model() made rank 0's choice of keeping quantized MoE experts: every rank's
    if (b->chooses_moe_experts_quantized())
      b->set_moe_experts_quantized(ranks.backends[0]->keeps_moe_experts_quantized());
  }
  SYV_LOG(INFO) << "tensor parallel: " << ranks.size << " ranks on " << names;
  return load_tensor_parallel(prepared, ranks.backends, options, std::move(ranks.group));
}

}  // namespace syv::cli
