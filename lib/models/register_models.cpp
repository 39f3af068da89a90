// Registers the built-in model families (called from register_builtins()): one line per family. Each
// family's declaration (HF model_type, architectures, loading rules, PEFT targets: `declaration()`, beside
// its class) is registered with it; its parameter shapes come from its constructor under MetaConstruction,
// its dimensions from its facts().
#include "models/bart.h"
#include "models/bert.h"
#include "models/gemma.h"
#include "models/gemma2.h"
#include "models/gemma3.h"
#include "models/gpt.h"
#include "models/gpt2.h"
#include "models/llama.h"
#include "models/mistral.h"
#include "models/mixtral.h"
#include "models/mlp.h"
#include "models/phi3.h"
#include "models/qwen2.h"
#include "models/qwen2_moe.h"
#include "models/qwen3.h"
#include "models/qwen3_moe.h"
#include "models/t5.h"
#include "registry/registry.h"

namespace hftrain {
namespace {

template <class M>
void add_family(Registry<Model, const ModelContext&>& models, const std::string& description) {
  const ModelFamily& family = M::declaration();
  register_model_family(family);
  models.add<M>(family.type, description);
}

}  // namespace

void register_models(Registry<Model, const ModelContext&>& models) {
  add_family<Gpt>(models, "Decoder-only transformer shaped like GPT-2/nanoGPT, weight-tied LM head.");
  add_family<MlpClassifier>(models, "Feed-forward classifier over dense feature vectors.");
  add_family<Gpt2>(models, "HF GPT2LMHeadModel (Conv1D layout, gelu_new, tied LM head); GPT2Config option names.");
  add_family<BertForSequenceClassification>(models,
      "HF BertForSequenceClassification (pooler + classifier; regression when num_labels is 1).");
  add_family<BertForMaskedLM>(models, "HF BertForMaskedLM (MLM head tied to the word embeddings).");
  add_family<Llama>(models, "HF LlamaForCausalLM (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention).");
  add_family<Qwen2>(models, "HF Qwen2ForCausalLM (Qwen2 / Qwen2.5: llama's decoder with q/k/v biases, sliding layers).");
  add_family<Qwen3>(models, "HF Qwen3ForCausalLM (llama's decoder with per-head q / k RMSNorms, explicit head_dim).");
  add_family<Mistral>(models, "HF MistralForCausalLM (llama's decoder with sliding-window attention).");
  add_family<Mixtral>(models, "HF MixtralForCausalLM (mistral's decoder with routed experts in every layer, top-k of "
                              "num_local_experts).");
  add_family<Qwen2Moe>(models, "HF Qwen2MoeForCausalLM (qwen2's decoder with routed experts and a gated shared expert).");
  add_family<Qwen3Moe>(models, "HF Qwen3MoeForCausalLM (qwen3's decoder with routed experts).");
  add_family<Phi3>(models, "HF Phi3ForCausalLM (llama's decoder with fused qkv / gate_up projections, partial rotary).");
  add_family<Gemma>(models, "HF GemmaForCausalLM (llama's decoder with (1 + weight) norms, scaled embeddings, GELU-tanh).");
  add_family<Gemma2>(models, "HF Gemma2ForCausalLM (gemma's decoder with sandwich norms, soft-capped scores and logits, "
                             "alternating sliding layers).");
  add_family<Gemma3>(models, "HF Gemma3ForCausalLM (gemma2's decoder with per-head q / k norms, a local rotary on its "
                             "sliding layers).");
  add_family<T5>(models,
                 "HF T5ForConditionalGeneration (encoder-decoder, relative position buckets, RMS norms; "
                 "relu or gated-gelu feed-forward); T5Config option names.");
  add_family<Bart>(models,
                   "HF BartForConditionalGeneration (post-LN encoder-decoder, learned positions with offset 2, "
                   "layernorm_embedding, final_logits_bias); BartConfig option names.");
}

}  // namespace hftrain
