"""Spark reads Strom partitions straight from the segment files (a PySpark Python DataSource)."""
