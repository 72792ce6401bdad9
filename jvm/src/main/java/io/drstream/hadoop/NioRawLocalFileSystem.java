package io.drstream.hadoop;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system with its permission and link calls made in the JVM, not by
 * starting a process.
 *
 * <p>Without Hadoop's native library (pyspark ships none), {@link RawLocalFileSystem} runs
 * {@code chmod} for every file and directory it creates with a permission, and {@code readlink}
 * for every {@code getFileLinkStatus}, which FileContext calls on each rename. A micro-batch's
 * offset and commit logs and the offset index's Delta commit start some twenty such processes.
 * Each costs CPU and latency on the batch's critical path, and each is a child of the driver's
 * JVM in its process group: a SIGTERM to the group (systemd's stop, a terminal's kill) ends it
 * with exit 143 and fails the checkpoint write it belonged to.
 *
 * <p>Invariants: a file's resulting mode is the one Hadoop's {@code chmod} would have set; a
 * mode java.nio cannot express (sticky, setuid, setgid) and a file system without POSIX
 * attributes go through Hadoop's own call; a path that is a symbolic link gets Hadoop's own
 * link status, so only the common case (not a link) changes how it is computed, not what it is.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
  };

  /** The nine rwx bits of a mode as java.nio's set; null when the mode has bits beyond them. */
  static Set<PosixFilePermission> posixPermissions(short mode) {
    if ((mode & ~0777) != 0) {
      return null;
    }
    Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < BITS.length; bit++) {
      if ((mode & (1 << bit)) != 0) {
        out.add(BITS[bit]);
      }
    }
    return out;
  }

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    Set<PosixFilePermission> wanted = posixPermissions(permission.toShort());
    if (wanted == null) {
      super.setPermission(p, permission);
      return;
    }
    java.nio.file.Path file = pathToFile(p).toPath();
    try {
      Files.setPosixFilePermissions(file, wanted);
    } catch (UnsupportedOperationException noPosix) {
      super.setPermission(p, permission);
    } catch (NoSuchFileException gone) {
      throw new FileNotFoundException("File " + p + " does not exist");
    }
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (Files.isSymbolicLink(pathToFile(f).toPath())) {
      return super.getFileLinkStatus(f);
    }
    return getFileStatus(f);
  }
}
