// Registers the built-in model components and their shape-only twins (called from register_builtins()).
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
  models.add<Gpt2>("gpt2", "HF GPT2LMHeadModel (Conv1D layout, gelu_new, tied LM head); GPT2Config option names.");
  models.add<BertForSequenceClassification>(
      "bert", "HF BertForSequenceClassification (pooler + classifier; regression when num_labels is 1).");
  models.add<BertForMaskedLM>("bert_mlm", "HF BertForMaskedLM (MLM head tied to the word embeddings).");
  models.add<Llama>("llama", "HF LlamaForCausalLM (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention).");
  models.add<T5>("t5", "HF T5ForConditionalGeneration (encoder-decoder, relative position buckets, RMS norms; "
                       "relu or gated-gelu feed-forward); T5Config option names.");
  models.add<Bart>("bart", "HF BartForConditionalGeneration (post-LN encoder-decoder, learned positions with offset 2, "
                           "layernorm_embedding, final_logits_bias); BartConfig option names.");
}

void register_model_shapes(Registry<ModelShapes, const ModelContext&>& shapes) {
  shapes.add<ShapesOf<Gpt>>("gpt", "parameter shapes of gpt");
  shapes.add<ShapesOf<MlpClassifier>>("mlp", "parameter shapes of mlp");
  shapes.add<ShapesOf<Gpt2>>("gpt2", "parameter shapes of gpt2");
  shapes.add<ShapesOf<BertForSequenceClassification>>("bert", "parameter shapes of bert");
  shapes.add<ShapesOf<BertForMaskedLM>>("bert_mlm", "parameter shapes of bert_mlm");
  shapes.add<ShapesOf<Llama>>("llama", "parameter shapes of llama");
  shapes.add<ShapesOf<T5>>("t5", "parameter shapes of t5");
  shapes.add<ShapesOf<Bart>>("bart", "parameter shapes of bart");
}

}  // namespace hftrain
