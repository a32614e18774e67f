# Kafka's codec ids: bits 0-2 of a record batch's attributes.
cdef enum:
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4

# data: any contiguous buffer. level: Kafka's level of the codec (LEVELS), None for its
# default (and for snappy and none, which have no levels). compress raises ValueError for
# an unknown codec or a level outside the codec's range; decompress raises
# CorruptRecordError for an unknown codec, undecodable data, or data that decompresses past
# max_size bytes (MAX_DECOMPRESSED_BYTES, 64 MiB, by default).
cpdef bytes compress(int codec, object data, object level=*)
cpdef bytes decompress(int codec, object data, Py_ssize_t max_size=*)
