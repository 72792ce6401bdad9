import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Writes local state as a streaming checkpoint and a Delta table do, through Hadoop's FileContext
 * and FileSystem APIs with the file-system classes named by the arguments, then prints each
 * path's mode: "java LocalStateWrites.java DIR FILESYSTEM_CLASS ABSTRACT_FILESYSTEM_CLASS".
 */
public class LocalStateWrites {
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set("fs.file.impl", args[1]);
    conf.set("fs.AbstractFileSystem.file.impl", args[2]);
    conf.setBoolean("fs.file.impl.disable.cache", true);
    String dir = "file://" + args[0];
    FileContext context = FileContext.getFileContext(new java.net.URI(dir), conf);
    context.mkdir(new Path(dir + "/offsets"), FsPermission.getDirDefault(), true);
    try (FSDataOutputStream out = context.create(new Path(dir + "/offsets/.0.tmp"),
        EnumSet.of(CreateFlag.CREATE), Options.CreateOpts.perms(FsPermission.getFileDefault()))) {
      out.writeBytes("v1\n");
    }
    context.rename(new Path(dir + "/offsets/.0.tmp"), new Path(dir + "/offsets/0"), Options.Rename.NONE);
    context.getFileLinkStatus(new Path(dir + "/offsets/0"));
    FileSystem fs = FileSystem.get(new java.net.URI(dir), conf);
    fs.mkdirs(new Path(dir + "/table"));
    try (FSDataOutputStream out = fs.create(new Path(dir + "/table/part-0.parquet"))) {
      out.writeBytes("data");
    }
    fs.setPermission(new Path(dir + "/table/part-0.parquet"), new FsPermission((short) 0640));
    System.out.println("raw " + ((org.apache.hadoop.fs.LocalFileSystem) fs).getRaw().getClass().getName());
    for (String name : new String[] {"offsets", "offsets/0", "offsets/.0.crc", "table", "table/part-0.parquet"}) {
      System.out.println(name + " " + PosixFilePermissions.toString(
          Files.getPosixFilePermissions(java.nio.file.Path.of(args[0], name))));
    }
  }
}
