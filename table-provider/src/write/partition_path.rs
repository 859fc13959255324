//! A data file's partition directory, as Iceberg Java writes it.
