# Kafka's codec ids: bits 0-2 of a record batch's attributes.
cdef enum:
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4

# data: any contiguous buffer. compress raises ValueError for an unknown codec;
# decompress raises CorruptRecordError for an unknown codec or undecodable data.
cpdef bytes compress(int codec, object data)
cpdef bytes decompress(int codec, object data)
