// The weight table of a model: every tensor it reads, with the shape the config implies, plus the
// two ways of filling it (from the checkpoint or seeded random values) and the upload to a backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/bulk_upload.h"
#include "backend/random_fill.h"
#include "backend/weight.h"
#include "core/status.h"
#include "io/quant_config.h"
#include "io/safetensors.h"

namespace syv {

// How a random weight is drawn (LoadOptions::random_weights, `syv demo-model`).
enum class WeightInit : uint8_t {
  kNorm,        // 1 + U(-0.1, 0.1): plain-weight RMSNorm around 1
  kEmbedding,   // std 1
  kProjection,  // std 1/sqrt(fan_in), fan_in = shape.back()
  kZero,        // biases
};

struct WeightSpec {
  std::string name;  // as in the checkpoint, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // outermost first, as in the checkpoint
  WeightInit init = WeightInit::kProjection;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// "[512, 96]"
std::string shape_string(const std::vector<int64_t>& shape);

// How weight number `index` of a model seeded with `seed` is drawn: element i is
// offset + random_uniform(stream, i, scale) (backend/random_fill.h), so a device-side
// Backend::fill_random(stream, scale) gives the same values (offset 0) rounded to its dtype.
struct RandomWeightDraw {
  uint64_t stream = 0;
  float scale = 0.0f;   // uniform in [-scale, scale)
  float offset = 0.0f;  // 1 for norms
  float value(int64_t i) const {
    if (scale == 0.0f) return offset;
    const float r = random_uniform(stream, static_cast<uint64_t>(i), scale);
    return offset == 0.0f ? r : offset + r;
  }
};
RandomWeightDraw random_weight_draw(const WeightSpec& spec, uint64_t seed, uint64_t index);

// Deterministic random values for weight number `index` of a model seeded with `seed`: the same on
// every machine and thread count. Writes spec.numel() floats (random_weight_draw's values).
void fill_random_weight(const WeightSpec& spec, uint64_t seed, uint64_t index, float* out);

// The checkpoint's tensor for `spec`, checked: present, of the spec's shape, f32 / f16 / bf16.
// Errors name the file, the tensor, the expected and the found shape / dtype.
Result<const TensorInfo*> check_weight_in_store(const WeightSpec& spec, const WeightStore& store);
// The same for a checkpoint of any quantization: a module stored quantized
// (model/quant_weights.h) has its quantized tensors checked instead.
Status check_spec_in_store(const WeightSpec& spec, const WeightStore& store,
                           const QuantConfig& quant);
// What the weight named `weight_name` (or a fused weight's key, model/prepare_model.h) is to the
// model, as the loader announces it to reserve_quantized_scratch: "lm_head.weight" the output
// projection (an MTP head shares it), a name with ".experts." a MoE layer's stacked experts,
// anything else a linear.
QuantWeightRole quant_weight_role(const std::string& weight_name);
// Bytes `spec` takes in backend memory when the loader keeps it quantized (its canonical layout,
// backend/weight.h); nullopt when it loads dense.
std::optional<int64_t> quantized_spec_bytes(const WeightSpec& spec, const WeightStore* store,
                                            const QuantConfig& quant);

// A weight in backend memory: the Weight the backend ops take (backend/weight.h; `tensor` is its
// data) plus the buffers it points into. Dense weights are in backend.weight_dtype(file dtype);
// a module stored quantized keeps its canonical quantized layout (model/quant_weights.h).
struct DeviceWeight : Weight {
  DeviceBuffer buffer;                     // tensor's bytes
  DeviceBuffer scale_buffer, zero_buffer;  // scales / zeros (quantized formats); empty for dense
  DeviceBuffer index_buffer;               // g_idx (act-order int4); empty otherwise
};

struct HostQuantWeight;  // model/quant_weights.h

// Which checkpoint tensors ("model.layers.0.self_attn.q_proj.weight", ...) each loaded weight holds
// rows of, keyed by the weight's data pointer (WeightLoader::record_sources,
// LoadOptions::weight_sources): `syv quantize --calibration-file` maps the weight of a linear() it
// observes back to the tensors whose inputs those are.
using WeightSources = std::unordered_map<const void*, std::vector<std::string>>;

// Reads weights from a checkpoint (store != nullptr) or draws them at random, checks them against
// their spec, and uploads them in the backend's preferred dtype.
//
// Checkpoint tensors go straight from the mapped file into staging memory (converted on the way
// only when the backend's dtype differs from the file's; never through f32 when they match) and
// to the backend with async copies (backend/bulk_upload.h). Random weights are drawn by the
// backend itself (Backend::fill_random: on the GPU for CUDA); only norm vectors are drawn on the
// host. Weight k (in load order, counting each part of a load_concat) gets random_weight_draw(
// spec, seed, k), so the model is the same whichever backend draws it.
//
// Quantized checkpoints (`quant` from config.json): a module stored quantized loads in its
// canonical quantized layout through load() / load_concat() / load_rows() (parts that cannot
// share one layout, and the embedding, which is a table lookup, load dequantized, with a log
// line); read_f32() dequantizes (finish() logs how many it did).
//
// Logs a progress line about every 2 s and, at finish(), "load: 16.38 GB in 3.10 s (5.28 GB/s)".
class WeightLoader {
 public:
  // store == nullptr: random weights from `seed` (they count as bf16 "file" weights).
  WeightLoader(Backend& backend, const WeightStore* store, uint64_t seed,
               const QuantConfig& quant = QuantConfig());
  ~WeightLoader();  // finish()
  WeightLoader(const WeightLoader&) = delete;
  WeightLoader& operator=(const WeightLoader&) = delete;

  // Errors name the file, the tensor, the expected and the found shape / dtype.
  Result<DeviceWeight> load(const WeightSpec& spec);
  // Several weights concatenated along dim 0 into one buffer (e.g. gate_proj rows then up_proj
  // rows): shape [sum of dim 0, trailing dims], which must agree (1-D or 2-D). Each part is
  // checked as load() checks it; the dtype is backend.weight_dtype() of the first part's.
  Result<DeviceWeight> load_concat(const std::vector<WeightSpec>& specs);
  // Rows [first, first + count) of weight `part` (an index into `specs`, 2-D weights of one
  // width), for each range in order, concatenated along dim 0 into one buffer, straight from the
  // files as load_concat() copies (e.g. the query and gate halves of each head of a gated q_proj:
  // no f32 copy on the host). Each weight is checked as load() checks it; progress counts the
  // rows' bytes, and a weight once, with its row 0. Needs slices_rows(specs); read_f32() and
  // upload() serve the others.
  struct RowRange {
    size_t part = 0;
    int64_t first = 0, count = 0;
  };
  Result<DeviceWeight> load_rows(const std::vector<WeightSpec>& specs,
                                 const std::vector<RowRange>& ranges);
  // Whether load_rows() takes `specs`: weights read from a store, all of them float or all stored
  // quantized (the rows then stay quantized: slice_rows + concat_quantized, exact; parts whose
  // layouts differ load dequantized, with a log line).
  bool slices_rows(const std::vector<WeightSpec>& specs) const;
  // Uploads host f32 values (e.g. weights split or interleaved on the host) in the backend's
  // weight dtype.
  DeviceWeight upload(const std::vector<int64_t>& shape, DType file_dtype, const float* values);
  // Reads (or draws) one weight as host f32 values after the same checks as load().
  Result<std::vector<float>> read_f32(const WeightSpec& spec, DType* file_dtype);

  // Waits until every weight is in backend memory and logs the summary line. Later loads may
  // follow (the next finish() reports the total).
  void finish();

  // Later load()s of an embedding table (WeightInit::kEmbedding, stored in float) go to
  // host-resident memory (Backend::allocate_host_resident) instead of the device: a lookup reads
  // a few rows a step (--host-embeddings). Only for untied tables (the caller checks: a tied table
  // is also the lm_head, read whole every step).
  void keep_embeddings_on_host(bool on) { host_embeddings_ = on; }

  int64_t parameters_loaded() const { return parameters_; }
  int64_t device_bytes() const { return device_bytes_; }  // host-resident bytes not included

  // Whether `spec` is stored quantized in the checkpoint (load() then keeps it quantized).
  bool quantized(const WeightSpec& spec) const;
  Backend& backend() const { return backend_; }

  // Later loads note which checkpoint tensors each weight holds rows of, in `sources` (keyed by
  // the weight's data pointer; load(), load_concat() and load_rows() note their specs' names,
  // a weight built by upload() only what note_sources() says). Null: nothing is noted.
  void record_sources(WeightSources* sources) { sources_ = sources; }
  // Notes `names` as the checkpoint tensors `w` holds rows of (weights split or interleaved on
  // the host and then upload()ed), when record_sources() asked for it.
  void note_sources(const DeviceWeight& w, std::vector<std::string> names);
  // Notes `names` for the rows of `w` from `first_row` on (rows of w's last dimension), keyed by
  // the address of that row: the MoE experts stacked in one weight, each of which the CPU
  // backend reports by its own slice (cpu::moe_experts).
  void note_sources_from_row(const DeviceWeight& w, int64_t first_row,
                             std::vector<std::string> names);

 private:
  Result<const TensorInfo*> checked(const WeightSpec& spec) const;
  Result<DeviceWeight> load_concat_unnoted(const std::vector<WeightSpec>& specs);
  Result<DeviceWeight> load_rows_unnoted(const std::vector<WeightSpec>& specs,
                                         const std::vector<RowRange>& ranges);
  // Rows `ranges` of the file tensors `infos` (rows of `width` elements) into one new weight of
  // `shape`, converted to the backend's weight dtype: load_concat()'s and load_rows()' copy.
  // host: into host-resident memory (keep_embeddings_on_host).
  DeviceWeight copy_file_rows(const std::vector<const TensorInfo*>& infos,
                              const std::vector<RowRange>& ranges,
                              const std::vector<int64_t>& shape, int64_t width, bool host = false);
  // load_concat() of specs of which at least one is stored quantized.
  Result<DeviceWeight> load_quantized(const std::vector<WeightSpec>& specs);
  // load_rows() of specs that are all stored quantized (ranges checked; `rows` their sum).
  Result<DeviceWeight> load_rows_quantized(const std::vector<WeightSpec>& specs,
                                           const std::vector<RowRange>& ranges, int64_t rows);
  // A canonical quantized weight into backend memory (its scratch reserved for `role`, as
  // Backend::reserve_quantized_scratch takes it).
  DeviceWeight upload_quantized(HostQuantWeight& h, QuantWeightRole role);
  DeviceBuffer upload_bytes(const void* src, size_t bytes);
  BulkUploader& uploader();
  DeviceWeight allocate(const std::vector<int64_t>& shape, DType dtype, bool host = false);
  void progress(size_t bytes);

  Backend& backend_;
  const WeightStore* store_;
  uint64_t seed_;
  QuantConfig quant_;
  uint64_t next_index_ = 0;
  int64_t parameters_ = 0;
  int64_t device_bytes_ = 0;
  int64_t host_bytes_ = 0;  // host-resident weights (keep_embeddings_on_host)
  bool host_embeddings_ = false;
  std::unique_ptr<BulkUploader> uploader_;
  std::chrono::steady_clock::time_point start_;
  double last_report_s_ = 0.0;
  size_t bytes_done_ = 0;  // file bytes read (or bytes drawn) so far
  // Quantized tensors read_f32() dequantized since the last finish() (the hybrids' re-arranged
  // weights), for finish()'s log line; load_quantized()'s dense groups log their own.
  int64_t dequantized_reads_ = 0;
  std::string first_dequantized_;
  int64_t tensors_ = 0;
  bool pending_ = false;              // loads since the last finish()
  WeightSources* sources_ = nullptr;  // record_sources()
};

}  // namespace syv
