// --tensor-parallel-size N (alias -tp N, as vLLM's) for the commands that load a model to run it
// (serve, generate, bench offline / decode / prefill): the model split over N ranks
// (model/tensor_parallel.h). On CUDA one GPU per rank, devices 0..N-1, the all-reduce NCCL's
// (backend/cuda/nccl_tp_group.h); on the CPU N simulated ranks in this process (HostTpGroup: for
// tests, no faster). N = 1, the default, loads the model as before.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/tp_comm.h"
#include "cli/engine_args.h"
#include "core/status.h"
#include "model/model.h"
#include "model/prepare_model.h"

namespace syv::cli {

void add_tensor_parallel_arg(CLI::App& app, int& size);

// "-tp" (and "-tp=N") in argv becomes "--tensor-parallel-size" before CLI11 reads it (CLI11 takes
// one-letter short options only); arguments after "--" are left alone.
std::vector<std::string> expand_tensor_parallel_alias(int argc, const char* const* argv);

// The ranks' backends: rank 0 is `first` (the command's, from --device), ranks 1.. new backends of
// its kind: CUDA devices 1..size-1 with an NCCL group (errors: fewer devices than ranks, naming how
// many exist; a build without NCCL), or CPU backends (a null group: load_tensor_parallel makes a
// HostTpGroup). Errors start with "--tensor-parallel-size N".
struct TpRanks {
  int size = 1;
  std::vector<std::unique_ptr<Backend>> owned;  // ranks 1..; must outlive the model
  std::vector<Backend*> backends;               // [size]; backends[0] = first
  std::unique_ptr<TpGroup> group;               // handed to the model by load_tp_model
};
Result<TpRanks> make_tp_ranks(Backend& first, int size);

// Whether the model of `config` splits over `size` ranks (check_tensor_parallel: pre-quantized
// weights, head counts and sizes that do not divide), the error prefixed with the flag.
Status check_tp_model(const ModelConfig& config, int size);

// Loads `prepared` over `ranks` (size 1: load_prepared_model on backends[0]); logs the choice.
// ranks.group is moved into the model.
Result<std::unique_ptr<Model>> load_tp_model(const PreparedModel& prepared, TpRanks& ranks,
                                             const LoadOptions& options);

}  // namespace syv::cli
