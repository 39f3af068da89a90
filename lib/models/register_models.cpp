// Registers the built-in model families (called from register_builtins()): each family once, as the model
// and its shape-only twin (the static parameter_shapes that `hftrain estimate` reads) under the same name.
#include "models/bart.h"
#include "models/bert.h"
#include "models/gpt.h"
#include "models/gpt2.h"
#include "models/llama.h"
#include "models/mlp.h"
#include "models/t5.h"
#include "registry/registry.h"

namespace hftrain {
namespace {

template <class M>
void add_family(Registry<Model, const ModelContext&>& models, Registry<ModelShapes, const ModelContext&>& shapes,
                const std::string& name, const std::string& description) {
  models.add<M>(name, description);
  shapes.add<ShapesOf<M>>(name, "parameter shapes of " + name);
}

}  // namespace

void register_models(Registry<Model, const ModelContext&>& models, Registry<ModelShapes, const ModelContext&>& shapes) {
  add_family<Gpt>(models, shapes, "gpt", "Decoder-only transformer shaped like GPT-2/nanoGPT, weight-tied LM head.");
  add_family<MlpClassifier>(models, shapes, "mlp", "Feed-forward classifier over dense feature vectors.");
  add_family<Gpt2>(models, shapes, "gpt2",
                   "HF GPT2LMHeadModel (Conv1D layout, gelu_new, tied LM head); GPT2Config option names.");
  add_family<BertForSequenceClassification>(
      models, shapes, "bert",
      "HF BertForSequenceClassification (pooler + classifier; regression when num_labels is 1).");
  add_family<BertForMaskedLM>(models, shapes, "bert_mlm", "HF BertForMaskedLM (MLM head tied to the word embeddings).");
  add_family<Llama>(models, shapes, "llama",
                    "HF LlamaForCausalLM (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention).");
  add_family<T5>(models, shapes, "t5",
                 "HF T5ForConditionalGeneration (encoder-decoder, relative position buckets, RMS norms; "
                 "relu or gated-gelu feed-forward); T5Config option names.");
  add_family<Bart>(models, shapes, "bart",
                   "HF BartForConditionalGeneration (post-LN encoder-decoder, learned positions with offset 2, "
                   "layernorm_embedding, final_logits_bias); BartConfig option names.");
}

}  // namespace hftrain
