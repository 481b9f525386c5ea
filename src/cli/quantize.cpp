// `syv quantize`: writes a pre-quantized copy of a float model folder (model/quantize_folder.h),
// int4 optionally by GPTQ over a calibration text (cli/quantize_calibration.h).
#include <memory>

#include "cli/command.h"
#include "cli/quantize_calibration.h"
#include "model/quantize_folder.h"

namespace syv::cli {
namespace {

struct Options {
  QuantizeOptions q;
  std::string format;
  CalibrationOptions calibration;
};

CommandRegistration reg{
    "quantize",
    "Write a pre-quantized copy of a bf16 model folder (fp8 | awq | gptq; round-to-nearest, or "
    "int4 by GPTQ over a calibration text)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option(
             "--format", o->format,
             "fp8: Qwen FP8 (e4m3, weight_scale_inv per 128x128 block); awq: AutoAWQ GEMM "
             "int4 with zero points; gptq: GPTQ v1 int4, symmetric, plain groups (no g_idx order)")
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
      CLI::Option* calibration_file = app.add_option(
          "--calibration-file", o->calibration.text_file,
          "awq / gptq: a text whose tokens calibrate the int4 rounding by GPTQ's error feedback "
          "(each layer's inputs on it, from the float model run on the CPU); without it every "
          "weight is rounded to nearest. Use text like what the model will see, not the text you "
          "evaluate on. Memory: the model in bf16 plus K^2 doubles per weight's input Gram matrix "
          "(~58 GB for an 8B model), run in several passes over the text when they exceed half "
          "the available memory; many cores help (minutes for small models)");
      CLI::Option* calibration_tokens =
          app.add_option("--calibration-tokens", o->calibration.max_tokens,
                         "--calibration-file: tokens of it used, from its start")
              ->capture_default_str();
      CLI::Option* calibration_context =
          app.add_option("--calibration-context", o->calibration.context,
                         "--calibration-file: tokens per window, each run as a fresh sequence "
                         "(capped by max_position_embeddings)")
              ->capture_default_str();
      CLI::Option* damp =
          app.add_option("--gptq-damp", o->calibration.damp,
                         "--calibration-file: GPTQ's damping, a fraction of the mean diagonal of "
                         "each layer's input Gram matrix added to it (damp_percent)")
              ->capture_default_str();
      CLI::Option* act_order = app.add_flag(
          "--act-order", o->calibration.act_order,
          "--calibration-file: quantize each weight's columns in order of decreasing input "
          "energy (diag of H; GPTQ's desc_act) with every group's scale fixed beforehand (static "
          "groups), so the folder keeps plain contiguous groups: no g_idx to gather at run time");
      app.footer(
          "Round-to-nearest quantization with one scale per 128x128 block (fp8) or per group of "
          "--group-size inputs (awq: min/max scale and zero point; gptq: symmetric; the group's "
          "range clipped to the fraction, 100% to 70%, that dequantizes nearest the weights). "
          "With --calibration-file the int4 formats take GPTQ's algorithm instead (columns in "
          "order, each one's rounding error spread over the rest through the inverse of the "
          "layer's input Gram matrix; in act-order with static groups under --act-order; every "
          "layer's inputs from one pass of the "
          "float model, not layer by layer through the quantized ones), in either layout; "
          "AutoAWQ's "
          "activation-aware scaling is not implemented. An MTP head runs too (on each window's "
          "rows as the drafter feeds it). MoE experts are calibrated each on the rows the router "
          "sends to it; an expert no calibration token reaches is rounded to nearest, and the log "
          "says how many. "
          "Quantized: the decoder layers' *_proj weights (gptq --lm-head: and lm_head); kept as "
          "they are: embeddings, lm_head, "
          "norms, the GDN in_proj_a / in_proj_b / in_proj_ba, the MoE router and "
          "shared_expert_gate.");
      return [o, group, calibration_file, calibration_tokens, calibration_context, damp,
              act_order]() -> int {
        if (group->count() > 0 && o->format == "fp8") {
          return fail("--group-size applies to awq and gptq; fp8 uses 128x128 blocks");
        }
        const bool calibrated = calibration_file->count() > 0;
        if (!calibrated) {
          for (CLI::Option* opt : {calibration_tokens, calibration_context, damp, act_order}) {
            if (opt->count() > 0) return fail(opt->get_name() + " needs --calibration-file");
          }
        } else if (o->format == "fp8") {
          return fail(
              "--calibration-file applies to awq and gptq (int4); fp8 is rounded to "
              "nearest per 128x128 block");
        }
        o->q.format = o->format == "fp8"   ? QuantizeFormat::kFp8
                      : o->format == "awq" ? QuantizeFormat::kAwq
                                           : QuantizeFormat::kGptq;
        GptqFactors factors;
        if (calibrated) {
          o->calibration.model_dir = o->q.in_dir;
          auto gathered = gather_gptq_factors(o->calibration);
          if (!gathered.ok()) return fail(gathered.message());
          factors = std::move(gathered.value());
          o->q.gptq = &factors;
          o->q.gptq_damp = o->calibration.damp;
          o->q.gptq_act_order = o->calibration.act_order;
        }
        Status s = quantize_folder(o->q);
        if (!s.ok()) return fail(s.message());
        return 0;
      };
    }};

}  // namespace
}  // namespace syv::cli
