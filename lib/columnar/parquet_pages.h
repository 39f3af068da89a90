// One parquet column chunk decoded: its pages (an optional dictionary page, then data pages v1 / v2,
// each decompressed by the chunk's codec) into repetition levels, definition levels and the JSON values
// of the entries whose definition level is the leaf's maximum.
#pragma once

#include <cstdint>
#include <vector>

#include "columnar/parquet_metadata.h"
#include "columnar/parquet_values.h"

namespace hftrain {

struct LeafColumn {
  std::vector<uint16_t> rep, def;  // one per entry (empty when the leaf's max level is 0: all entries at 0)
  JsonValues values;               // one per entry whose def is max_def
  std::size_t entries = 0;
};

struct LeafLevels {
  int max_def = 0;
  int max_rep = 0;
};

// Decodes the chunk `meta` of `file` (the whole file's bytes). Throws ConfigError (without the file or
// column: the caller adds them) on a refused codec or encoding, or corrupt / truncated data.
LeafColumn read_column_chunk(Bytes file, std::size_t data_end, const ColumnChunkMeta& meta, const LeafType& type,
                             LeafLevels levels);

}  // namespace hftrain
