// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), and TFRecord's masked form of it:
// ((crc >> 15) | (crc << 17)) + 0xa282ead8 (TensorFlow core/lib/hash/crc32c.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hftrain {

uint32_t crc32c(const void* data, std::size_t size);
uint32_t masked_crc32c(const void* data, std::size_t size);

}  // namespace hftrain
