"""Spark reads Strom partitions straight from the segment files (a PySpark Python DataSource).

No broker is involved: a PySpark 4.1+ Python DataSource reads the log dirs with engine/'s
read-only seam (engine/reader.py) and ext/'s vectorised decoder, and yields Arrow record
batches in the schema of Spark's built-in Kafka source.

Set-up (one line, once per SparkSession; this package is ``spark``, not ``pyspark``)::

    from spark.source import StromDataSource
    session.dataSource.register(StromDataSource)

    df = (session.read.format("strom")
          .option("path", "/var/lib/strom/data")        # log dirs, or the dir above them
          .option("subscribe", "orders")
          .option("startingOffsets", "earliest")
          .load())
    df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "partition", "offset").show()

    stream = (session.readStream.format("strom").option("path", "/var/lib/strom/data")
              .option("subscribe", "orders").option("maxOffsetsPerTrigger", "100000").load())

Schema (every field nullable, as Spark's Kafka source): key binary, value binary, topic
string, partition int, offset long, timestamp timestamp, timestampType int (0 CreateTime,
1 LogAppendTime), and with ``includeHeaders=true`` headers array<struct<key string,
value binary>> (null for a record without headers). Options: spark/options.py.

What a read sees. By default (``isolation=read_committed``) only committed records:
below each partition's high watermark as its log dir's ``replication-offset-checkpoint``
has it (a broker writes that file every replica.high.watermark.checkpoint.interval.ms,
5 s by default, so a read lags the live broker by up to that much). A partition with
replicas in several log dirs (a cluster's data dir) is read from the replica with the
highest checkpointed high watermark. Control batches (transaction markers) never appear.
Strom does not serve transactions yet, so there is no aborted data to skip; once it does,
read_committed will skip it as Kafka's read_committed consumers do. ``isolation=log_end``
reads everything in the files, including records a new leader may still truncate.

Modules::

    source.py    StromDataSource: schema, batch readers (with and without pushFilters)
    stream.py    StromStreamReader: per-partition offsets, maxOffsetsPerTrigger
    options.py   the options, named as Spark's Kafka source names them
    layout.py    log dirs, replicas, log start / high watermark / log end per partition
    planning.py  options -> offset ranges -> LogRange input partitions (split by size)
    reader.py    LogRange -> pread chunks -> ext.columns -> Arrow batches
    filters.py   filter pushdown (opt-in)
    errors.py    StromSparkError: every message starts "strom:" and says what to fix
    sink.py      df.write / df.writeStream.format("strom"): Spark's Kafka sink over the Kafka
                 protocol, one transaction per task, exactly once for streams (see there)

Python workers. Spark starts ``python3`` from PATH for its workers: set
``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) to the interpreter that has Strom and
pyarrow. Workers import this package by name (the data source is pickled by reference).

Filter pushdown is off by default. With ``.option("pushFilters", "true")`` predicates on
topic, partition, offset and timestamp prune segments before anything is decoded; it
needs ``spark.sql.python.filterPushdown.enabled=true`` in the session. Use it on a fresh
``load()`` per filtered query: PySpark 4.3.0 re-uses a pushed plan for a later query on
the same DataFrame without the filter (see filters.py). The Kafka-style options
(assign, starting/endingOffsets, startingTimestamp) select data exactly without that risk.

Running on a real cluster. Executors open the segment files themselves, so:

1. Every executor must see the log dirs at the same path: a shared filesystem (NFS,
   CephFS, Lustre, EFS...) mounted read-only is enough; the reader never writes, locks or
   maps files, so reading a live broker's dirs is safe. Files that retention deletes after
   planning fail the task with a message; read again.
2. Every executor needs this package and its compiled ext/ modules (so ``--py-files``
   with a zip will not do): build the wheel once (``python -m build --wheel`` in a
   checkout) and ``pip install 'dist/strom-<version>-<tags>.whl[spark]'`` on every node with
   the same Python, or ship a packed environment::

       python -m venv env && env/bin/pip install 'dist/strom-<version>-<tags>.whl[spark]' venv-pack
       env/bin/venv-pack -o strom-env.tar.gz
       spark-submit --master yarn --archives strom-env.tar.gz#env \\
           --conf spark.pyspark.python=./env/bin/python job.py

   (``local[*]`` hides this: its workers share the driver's machine; a multi-JVM local
   cluster, ``local-cluster[2,1,1024]``, shows it.)
"""
