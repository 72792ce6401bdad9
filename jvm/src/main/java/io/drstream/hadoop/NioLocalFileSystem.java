package io.drstream.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * {@code fs.file.impl}: Hadoop's checksummed local file system over {@link NioRawLocalFileSystem},
 * for the FileSystem API (Spark's file sinks, Parquet, Delta's data files).
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new NioRawLocalFileSystem());
  }
}
