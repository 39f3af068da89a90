// Registers the built-in model families (called from register_builtins()): one line per family. Its
// parameter shapes come from its constructor under MetaConstruction, its dimensions from its facts().
#include "models/bart.h"
#include "models/bert.h"
#include "models/gpt.h"
#include "models/gpt2.h"
#include "models/llama.h"
#include "models/mlp.h"
#include "models/t5.h"
#include "registry/registry.h"

namespace hftrain {
void register_models(Registry<Model, const ModelContext&>& models) {
  models.add<Gpt>("gpt", "Decoder-only transformer shaped like GPT-2/nanoGPT, weight-tied LM head.");
  models.add<MlpClassifier>("mlp", "Feed-forward classifier over dense feature vectors.");
  models.add<Gpt2>("gpt2",
                   "HF GPT2LMHeadModel (Conv1D layout, gelu_new, tied LM head); GPT2Config option names.");
  models.add<BertForSequenceClassification>("bert",
      "HF BertForSequenceClassification (pooler + classifier; regression when num_labels is 1).");
  models.add<BertForMaskedLM>("bert_mlm", "HF BertForMaskedLM (MLM head tied to the word embeddings).");
  models.add<Llama>("llama",
                    "HF LlamaForCausalLM (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention).");
  models.add<T5>("t5",
                 "HF T5ForConditionalGeneration (encoder-decoder, relative position buckets, RMS norms; "
                 "relu or gated-gelu feed-forward); T5Config option names.");
  models.add<Bart>("bart",
                   "HF BartForConditionalGeneration (post-LN encoder-decoder, learned positions with offset 2, "
                   "layernorm_embedding, final_logits_bias); BartConfig option names.");
}

}  // namespace hftrain
