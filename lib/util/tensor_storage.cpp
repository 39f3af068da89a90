// Releasing and re-allocating a tensor's storage in place (see tensor_storage.h).
#include "util/tensor_storage.h"

namespace hftrain {

void release_storage(const torch::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

void allocate_storage(const torch::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * t.element_size();
  c10::Allocator* allocator = s->allocator() ? s->allocator() : c10::GetAllocator(t.device().type());
  s->set_data_ptr_noswap(allocator->allocate(bytes));
  s->set_nbytes(bytes);
}

void borrow_storage(const torch::Tensor& t, void* data) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(data, t.device()));
  s->set_nbytes(static_cast<std::size_t>(t.numel()) * t.element_size());
}

}  // namespace hftrain
