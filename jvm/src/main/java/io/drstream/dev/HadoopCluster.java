package io.drstream.dev;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * A single-node Hadoop for development and tests: one HDFS (NameNode + DataNode) and one YARN
 * (ResourceManager + NodeManager) in this JVM, built from Hadoop's own mini-cluster classes.
 *
 * <p>Usage: {@code HadoopCluster <work dir> <conf dir> <namenode port> <nodemanager MiB> <vcores>}.
 * Once both answer, the client configuration (core-site.xml, hdfs-site.xml, yarn-site.xml) is
 * written to the conf dir for {@code HADOOP_CONF_DIR}, then a {@code ready} file holding the
 * file system URI; the caller waits for that file. The cluster runs until the process is
 * signalled; HDFS is formatted at every start, so it holds nothing from a previous run.
 *
 * <p>Invariants: the ready file appears only after the NodeManager has registered, so an
 * application submitted then gets a container; no address is written before it is bound.
 */
public final class HadoopCluster {
  private HadoopCluster() {}

  public static void main(String[] args) throws Exception {
    try {
      run(args);
    } catch (Exception | Error e) {
      // HDFS's threads would keep a half-started cluster alive; the caller sees the exit instead.
      e.printStackTrace();
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    File work = new File(args[0]).getAbsoluteFile();
    File confDir = new File(args[1]).getAbsoluteFile();
    int nameNodePort = Integer.parseInt(args[2]);
    int memoryMb = Integer.parseInt(args[3]);
    int vcores = Integer.parseInt(args[4]);
    Files.deleteIfExists(new File(confDir, "ready").toPath());

    YarnConfiguration conf = new YarnConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(work, "hdfs").getPath());
    // One user on one machine: HDFS permissions would only stand between the NodeManager's
    // containers and the staging directory they share with the submitter.
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.setInt("dfs.replication", 1);
    MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf, new File(work, "hdfs"))
        .nameNodePort(nameNodePort)
        .numDataNodes(1)
        .format(true)
        .build();
    dfs.waitActive();
    conf.set("fs.defaultFS", dfs.getURI().toString());

    // Sized for a small machine: the containers ask for the memory they need, the node offers
    // more vcores than cores because Spark's containers mostly wait on the network.
    conf.setInt(YarnConfiguration.NM_PMEM_MB, memoryMb);
    conf.setInt(YarnConfiguration.NM_VCORES, vcores);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 256);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, memoryMb);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_VCORES, vcores);
    // A JVM reserves far more virtual memory than it uses; YARN's virtual-memory check would kill it.
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    // A nearly full developer disk must not mark the only node unhealthy.
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.5f);
    // Keep a finished container's directory and logs a while, so a failed attempt can be read.
    conf.setInt(YarnConfiguration.DEBUG_NM_DELETE_DELAY_SEC, 600);
    conf.setInt(YarnConfiguration.RM_AM_MAX_ATTEMPTS, 2);
    // The capacity scheduler with one queue; its default would give application masters (each
    // flow's driver, in cluster mode) only a tenth of the node.
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.8");
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, false);
    MiniYARNCluster yarn = new MiniYARNCluster("dr-stream", 1, 1, 1);
    yarn.init(conf);
    yarn.start();
    if (!yarn.waitForNodeManagersToConnect(60_000)) {
      throw new IllegalStateException("the NodeManager did not register within 60 s");
    }

    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      yarn.stop();
      dfs.shutdown();
    }, "hadoop-cluster-stop"));

    Configuration client = clientConfiguration(yarn.getConfig(), dfs);
    confDir.mkdirs();
    for (String name : new String[] {"core-site.xml", "hdfs-site.xml", "yarn-site.xml"}) {
      writeAtomically(client, new File(confDir, name));
    }
    File ready = new File(confDir, "ready");
    Files.writeString(new File(confDir, "ready.tmp").toPath(),
        dfs.getURI() + "\n" + client.get(YarnConfiguration.RM_ADDRESS) + "\n"
            + client.get(YarnConfiguration.RM_WEBAPP_ADDRESS) + "\n",
        StandardCharsets.UTF_8);
    Files.move(new File(confDir, "ready.tmp").toPath(), ready.toPath(), StandardCopyOption.ATOMIC_MOVE);
    System.out.println("ready " + dfs.getURI() + " " + client.get(YarnConfiguration.RM_ADDRESS));
    Thread.currentThread().join();
  }

  /**
   * What a client needs: where HDFS and the ResourceManager listen, and the replication the
   * single DataNode can hold. Only these keys are written, not the servers' whole configuration,
   * which names test-only classes (a static rack mapping) that Spark's containers do not have.
   */
  private static Configuration clientConfiguration(Configuration servers, MiniDFSCluster dfs) {
    Configuration client = new Configuration(false);
    client.set("fs.defaultFS", dfs.getURI().toString());
    client.set("dfs.replication", "1");
    for (String key : new String[] {
        YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
        YarnConfiguration.RM_ADMIN_ADDRESS, YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS,
        YarnConfiguration.RM_WEBAPP_ADDRESS, YarnConfiguration.RM_AM_MAX_ATTEMPTS,
        YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB,
        YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_VCORES}) {
      client.set(key, servers.get(key));
    }
    return client;
  }

  private static void writeAtomically(Configuration conf, File target) throws IOException {
    File tmp = new File(target.getPath() + ".tmp");
    try (OutputStream out = new FileOutputStream(tmp)) {
      conf.writeXml(out);
    }
    Files.move(tmp.toPath(), target.toPath(), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }
}
