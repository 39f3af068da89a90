// A C interface to libsentencepiece, built as its own shared module (hftrain_sentencepiece) and loaded by
// sentencepiece_tokenizer.cpp with dlmopen(LM_ID_NEWLM). libsentencepiece carries a private copy of
// protobuf-lite whose exported symbols clash with the system libprotobuf that LibTorch loads; in a separate
// link-map namespace it keeps its own copy (RTLD_DEEPBIND is not enough: libsentencepiece's std::cerr would
// then bind to an uninitialised libstdc++ object). Only plain data crosses the interface. Not part of hftrain_lib.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

// Each entry point has C linkage and default visibility (the loader looks it up by name).
#define HFTRAIN_SPM_API extern "C" __attribute__((visibility("default")))

namespace {

// Copies `s` into the caller's buffer (NUL-terminated, truncated to fit).
void put(const std::string& s, char* buf, int64_t size) {
  if (!buf || size <= 0) return;
  std::size_t n = std::min<std::size_t>(s.size(), static_cast<std::size_t>(size - 1));
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
}

}  // namespace

// Returns a processor handle, or null with the reason in `error`.
HFTRAIN_SPM_API void* hftrain_spm_load(const char* path, char* error, int64_t error_size) {
  try {  // no exception may cross into the caller's namespace (it has another libstdc++)
    auto* sp = new sentencepiece::SentencePieceProcessor();
    auto status = sp->Load(path);
    if (!status.ok()) {
      put(status.ToString(), error, error_size);
      delete sp;
      return nullptr;
    }
    return sp;
  } catch (const std::exception& e) {
    put(e.what(), error, error_size);
    return nullptr;
  }
}

HFTRAIN_SPM_API void hftrain_spm_free(void* handle) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

// what: 0 piece count, 1 bos, 2 eos, 3 unk, 4 pad.
HFTRAIN_SPM_API int64_t hftrain_spm_info(void* handle, int what) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  switch (what) {
    case 0: return sp->GetPieceSize();
    case 1: return sp->bos_id();
    case 2: return sp->eos_id();
    case 3: return sp->unk_id();
    case 4: return sp->pad_id();
    default: return -1;
  }
}

// Encodes `text`; ids are handed to `sink(ctx, id, piece, piece_len)` one by one. Returns 0, or -1 with `error`.
HFTRAIN_SPM_API int hftrain_spm_encode(void* handle, const char* text, int64_t len,
                                       void (*sink)(void*, int64_t, const char*, int64_t), void* ctx, char* error,
                                       int64_t error_size) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  try {
    std::vector<int> ids;
    auto status = sp->Encode(absl::string_view(text, static_cast<std::size_t>(len)), &ids);
    if (!status.ok()) {
      put(status.ToString(), error, error_size);
      return -1;
    }
    for (int id : ids) {
      const std::string& piece = sp->IdToPiece(id);
      sink(ctx, id, piece.data(), static_cast<int64_t>(piece.size()));
    }
    return 0;
  } catch (const std::exception& e) {
    put(e.what(), error, error_size);
    return -1;
  }
}

// Decodes ids; the text is handed to `sink(ctx, text, len)`. Returns 0, or -1 with `error`.
HFTRAIN_SPM_API int hftrain_spm_decode(void* handle, const int64_t* ids, int64_t n,
                                       void (*sink)(void*, const char*, int64_t), void* ctx, char* error,
                                       int64_t error_size) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  try {
    std::vector<int> v(ids, ids + n);
    std::string out;
    auto status = sp->Decode(v, &out);
    if (!status.ok()) {
      put(status.ToString(), error, error_size);
      return -1;
    }
    sink(ctx, out.data(), static_cast<int64_t>(out.size()));
    return 0;
  } catch (const std::exception& e) {
    put(e.what(), error, error_size);
    return -1;
  }
}

HFTRAIN_SPM_API int64_t hftrain_spm_piece_to_id(void* handle, const char* piece, int64_t len) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->PieceToId(
      absl::string_view(piece, static_cast<std::size_t>(len)));
}

// Hands the piece of `id` to `sink(ctx, piece, len)`.
HFTRAIN_SPM_API void hftrain_spm_id_to_piece(void* handle, int64_t id, void (*sink)(void*, const char*, int64_t),
                                             void* ctx) {
  const std::string& piece = static_cast<sentencepiece::SentencePieceProcessor*>(handle)->IdToPiece(static_cast<int>(id));
  sink(ctx, piece.data(), static_cast<int64_t>(piece.size()));
}

// Trains a model (sentencepiece_trainer flags). Returns 0, or -1 with `error`.
HFTRAIN_SPM_API int hftrain_spm_train(const char* args, char* error, int64_t error_size) {
  try {
    auto status = sentencepiece::SentencePieceTrainer::Train(args);
    if (!status.ok()) {
      put(status.ToString(), error, error_size);
      return -1;
    }
    return 0;
  } catch (const std::exception& e) {
    put(e.what(), error, error_size);
    return -1;
  }
}
