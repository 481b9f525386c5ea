// `syv quantize`: writes a pre-quantized copy of a float model folder (model/quantize_folder.h).
#include <memory>

#include "cli/command.h"
#include "model/quantize_folder.h"

namespace syv::cli {
namespace {

struct Options {
  QuantizeOptions q;
  std::string format;
};

CommandRegistration reg{
    "quantize",
    "Write a pre-quantized copy of a bf16 model folder (fp8 | awq | gptq; round-to-nearest)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--format", o->format,
                     "fp8: Qwen FP8 (e4m3, weight_scale_inv per 128x128 block); awq: AutoAWQ GEMM "
                     "int4 with zero points; gptq: GPTQ v1 int4, symmetric, no act-order")
          ->required()
          ->check(CLI::IsMember({"fp8", "awq", "gptq"}));
      app.add_option("--in", o->q.in_dir, "the float (bf16/f16/f32) model folder")->required();
      app.add_option("--out", o->q.out_dir, "the folder to write (created)")->required();
      app.add_flag("--lm-head", o->q.lm_head,
                   "gptq: quantize lm_head.weight too (\"lm_head\": true, as GPTQModel writes it "
                   "with lm_head=True); models with untied embeddings. Frees ~3/4 of its bytes "
                   "(2.5 GB -> 0.66 GB on Qwen3.5-27B) for some accuracy");
      CLI::Option* group =
          app.add_option("--group-size", o->q.group_size,
                         "awq / gptq: input columns per scale (must divide every projection's K)")
              ->capture_default_str();
      app.footer(
          "Round-to-nearest quantization with one scale per 128x128 block (fp8) or per group of "
          "--group-size inputs (awq: min/max scale and zero point; gptq: symmetric; the group's "
          "range clipped to the fraction, 100% to 70%, that dequantizes nearest the weights), no "
          "calibration data: quality is below what AutoAWQ / GPTQ with calibration reach. "
          "Quantized: the decoder layers' *_proj weights (gptq --lm-head: and lm_head); kept as "
          "they are: embeddings, lm_head, "
          "norms, the GDN in_proj_a / in_proj_b / in_proj_ba, the MoE router and "
          "shared_expert_gate.");
      return [o, group]() -> int {
        if (group->count() > 0 && o->format == "fp8") {
          return fail("--group-size applies to awq and gptq; fp8 uses 128x128 blocks");
        }
        o->q.format = o->format == "fp8"   ? QuantizeFormat::kFp8
                      : o->format == "awq" ? QuantizeFormat::kAwq
                                           : QuantizeFormat::kGptq;
        Status s = quantize_folder(o->q);
        if (!s.ok()) return fail(s.message());
        return 0;
      };
    }};

}  // namespace
}  // namespace syv::cli
