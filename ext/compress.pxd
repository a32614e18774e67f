# Kafka's codec ids: bits 0-2 of a record batch's attributes.
cdef enum:
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4

# data: any contiguous buffer. compress raises ValueError for an unknown codec;
# decompress raises CorruptRecordError for an unknown codec, undecodable data, or data
# that decompresses past max_size bytes (MAX_DECOMPRESSED_BYTES, 64 MiB, by default).
cpdef bytes compress(int codec, object data)
cpdef bytes decompress(int codec, object data, Py_ssize_t max_size=*)
