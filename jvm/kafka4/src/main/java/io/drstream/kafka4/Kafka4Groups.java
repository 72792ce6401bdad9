package io.drstream.kafka4;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import io.drstream.kafka.GroupOffsets;

/**
 * Share groups (KIP-932) and Kafka Streams groups (KIP-1071) through Kafka 4's admin API, in a
 * JVM of its own.
 *
 * <p>Spark's Kafka connector carries the 3.9 client, which has neither API, and a second client
 * version on Spark's classpath would clash with it. This program runs on Kafka 4's client jars
 * alone, started by {@code dr_stream/kafka/kafka4_groups.py}, and answers requests read from
 * stdin, one per line, tab-separated, group ids URL-encoded (a group id may hold any character):
 *
 * <ul>
 *   <li>{@code connect TAB alias TAB key=value ...}: an admin client for a cluster (values
 *       URL-encoded; Apache Kafka's Java client properties as the user wrote them);
 *   <li>{@code list TAB alias TAB share|streams}: {@code group TAB state} per group of that type;
 *   <li>{@code describe TAB alias TAB share|streams TAB group ...}: {@code group TAB state TAB
 *       members};
 *   <li>{@code share-offsets TAB alias TAB group ...}: {@code group TAB topic TAB partition TAB
 *       start offset TAB} per share-partition the group has state for (an empty last field: the
 *       lines of a consumer group's committed offsets, whose metadata a share group has none of);
 *   <li>{@code share-alter TAB alias TAB group TAB topic:partition=offset,...}: nothing when the
 *       broker took them;
 *   <li>{@code group-configs TAB alias TAB group ...}: {@code group TAB key TAB value} per config
 *       the group has set itself (Kafka 4 group configs; defaults are left out), values
 *       URL-encoded;
 *   <li>{@code group-configs-alter TAB alias TAB group TAB key=value,... TAB key,...}: sets the
 *       first list (values URL-encoded) and deletes the second in one request; nothing when the
 *       broker took them;
 *   <li>{@code consumer-offsets TAB alias TAB group ...}: consumer groups' committed offsets,
 *       {@code group TAB topic TAB partition TAB offset TAB metadata} per offset, one fetch per
 *       coordinator for all the groups it holds (the flow's own {@link GroupOffsets}, here on
 *       Kafka 4's client): a command moving thousands of groups reads them in one round, where
 *       librdkafka takes a consumer, two connections and their TLS handshakes per group;
 *   <li>{@code consumer-commit TAB alias TAB metadata TAB group TAB topic:partition=offset,...
 *       [TAB group TAB ...]}: commits every group's offsets with the metadata (URL-encoded), all
 *       in flight at once; {@code group TAB ! TAB error} per group that failed.
 * </ul>
 *
 * <p>A group that failed answers {@code group TAB ! TAB error} instead, a request that failed as
 * a whole {@code ! TAB error}; every answer ends with a line {@code .}, so the caller reads
 * exactly one answer per request. Tabs and line breaks in an error are replaced by spaces.
 */
public final class Kafka4Groups {
  private static final Map<String, Admin> ADMINS = new HashMap<>();
  private static final Map<String, Properties> PROPERTIES = new HashMap<>();
  private static final Map<String, GroupOffsets> CONSUMER_GROUPS = new HashMap<>();
  private static long timeoutMs = 15_000;

  public static void main(String[] args) throws Exception {
    if (args.length > 0) {
      timeoutMs = Long.parseLong(args[0]);
    }
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    String line;
    try {
      while ((line = in.readLine()) != null) {
        List<String> answer = new ArrayList<>();
        try {
          answer(line.split("\t", -1), answer);
        } catch (ExecutionException e) {
          answer.add("!\t" + flat(e.getCause()));
        } catch (Exception e) {
          answer.add("!\t" + flat(e));
        }
        answer.forEach(out::println);
        out.println(".");
        out.flush();
      }
    } finally {
      ADMINS.values().forEach(admin -> admin.close(java.time.Duration.ofSeconds(5)));
      CONSUMER_GROUPS.values().forEach(GroupOffsets::close);
    }
  }

  private static void answer(String[] f, List<String> answer) throws Exception {
    switch (f[0]) {
      case "connect" -> connect(f);
      case "list" -> list(admin(f[1]), f[2], answer);
      case "describe" -> describe(admin(f[1]), f[2], groups(f, 3), answer);
      case "share-offsets" -> shareOffsets(admin(f[1]), groups(f, 2), answer);
      case "share-alter" -> shareAlter(admin(f[1]), decode(f[2]), f.length > 3 ? f[3] : "", answer);
      case "group-configs" -> groupConfigs(admin(f[1]), groups(f, 2), answer);
      case "group-configs-alter" -> groupConfigsAlter(admin(f[1]), decode(f[2]), f.length > 3 ? f[3] : "",
          f.length > 4 ? f[4] : "", answer);
      case "consumer-offsets" -> consumerOffsets(consumerGroups(f[1]), groups(f, 2), answer);
      case "consumer-commit" -> consumerCommit(consumerGroups(f[1]), decode(f[2]), f, answer);
      default -> throw new IllegalArgumentException("unknown request " + f[0]);
    }
  }

  private static void connect(String[] f) {
    Properties props = new Properties();
    for (int i = 2; i < f.length; i++) {
      int eq = f[i].indexOf('=');
      props.put(f[i].substring(0, eq), decode(f[i].substring(eq + 1)));
    }
    props.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) timeoutMs);
    props.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) Math.min(timeoutMs, 10_000));
    Admin old = ADMINS.put(f[1], Admin.create(props));
    if (old != null) {
      old.close();
    }
    PROPERTIES.put(f[1], props);
    GroupOffsets stale = CONSUMER_GROUPS.remove(f[1]);
    if (stale != null) {
      stale.close();
    }
  }

  /** The cluster's consumer-group client, built at its first request (its clients connect then). */
  private static GroupOffsets consumerGroups(String alias) {
    admin(alias);
    return CONSUMER_GROUPS.computeIfAbsent(alias, a -> {
      Map<String, String> props = new HashMap<>();
      PROPERTIES.get(a).forEach((k, v) -> props.put(String.valueOf(k), String.valueOf(v)));
      return new GroupOffsets(props, (int) timeoutMs);
    });
  }

  private static void consumerOffsets(GroupOffsets client, List<String> groups, List<String> answer)
      throws InterruptedException {
    for (String line : client.committed(String.join("\n", groups), (int) timeoutMs).split("\n")) {
      int tab = line.indexOf('\t');
      if (tab > 0) {
        answer.add(encode(line.substring(0, tab)) + line.substring(tab));
      }
    }
  }

  private static void consumerCommit(GroupOffsets client, String metadata, String[] f, List<String> answer)
      throws InterruptedException {
    StringBuilder lines = new StringBuilder();
    for (int i = 3; i + 1 < f.length; i += 2) {
      String group = decode(f[i]);
      for (String item : f[i + 1].split(",")) {
        if (item.isEmpty()) {
          continue;
        }
        int colon = item.lastIndexOf(':');
        int eq = item.lastIndexOf('=');
        lines.append(group).append('\t').append(item, 0, colon).append('\t').append(item, colon + 1, eq)
            .append('\t').append(item.substring(eq + 1)).append('\n');
      }
    }
    for (String line : client.commit(lines.toString(), metadata, (int) timeoutMs).split("\n")) {
      int tab = line.indexOf('\t');
      if (tab > 0) {
        answer.add(encode(line.substring(0, tab)) + "\t!" + line.substring(tab));
      }
    }
  }

  private static Admin admin(String alias) {
    Admin admin = ADMINS.get(alias);
    if (admin == null) {
      throw new IllegalStateException("no connect for cluster " + alias);
    }
    return admin;
  }

  private static void list(Admin admin, String type, List<String> answer) throws Exception {
    ListGroupsOptions options = "share".equals(type) ? ListGroupsOptions.forShareGroups()
        : ListGroupsOptions.forStreamsGroups();
    Collection<GroupListing> groups = admin.listGroups(options).all().get(timeoutMs, TimeUnit.MILLISECONDS);
    for (GroupListing g : groups) {
      answer.add(encode(g.groupId()) + "\t" + g.groupState().map(Enum::name).orElse("UNKNOWN"));
    }
  }

  private static void describe(Admin admin, String type, List<String> groups, List<String> answer) {
    Map<String, KafkaFuture<String>> found = new TreeMap<>();
    if ("share".equals(type)) {
      admin.describeShareGroups(groups).describedGroups().forEach(
          (g, f) -> found.put(g, f.thenApply(Kafka4Groups::shareState)));
    } else {
      admin.describeStreamsGroups(groups).describedGroups().forEach(
          (g, f) -> found.put(g, f.thenApply(Kafka4Groups::streamsState)));
    }
    found.forEach((group, future) -> answer.add(encode(group) + "\t" + result(future)));
  }

  private static String shareState(ShareGroupDescription d) {
    return d.groupState().name() + "\t" + d.members().size();
  }

  private static String streamsState(StreamsGroupDescription d) {
    return d.groupState().name() + "\t" + d.members().size();
  }

  private static void shareOffsets(Admin admin, List<String> groups, List<String> answer) throws Exception {
    Map<String, ListShareGroupOffsetsSpec> specs = new TreeMap<>();
    groups.forEach(g -> specs.put(g, new ListShareGroupOffsetsSpec()));
    var result = admin.listShareGroupOffsets(specs);
    for (String group : groups) {
      try {
        Map<TopicPartition, SharePartitionOffsetInfo> offsets =
            result.partitionsToOffsetInfo(group).get(timeoutMs, TimeUnit.MILLISECONDS);
        offsets.forEach((tp, info) -> {
          if (info != null) {
            answer.add(encode(group) + "\t" + tp.topic() + "\t" + tp.partition() + "\t" + info.startOffset() + "\t");
          }
        });
      } catch (ExecutionException e) {
        answer.add(encode(group) + "\t!\t" + flat(e.getCause()));
      }
    }
  }

  private static void shareAlter(Admin admin, String group, String offsets, List<String> answer) throws Exception {
    Map<TopicPartition, Long> wanted = new HashMap<>();
    for (String item : offsets.split(",")) {
      if (item.isEmpty()) {
        continue;
      }
      int colon = item.lastIndexOf(':');
      int eq = item.lastIndexOf('=');
      wanted.put(new TopicPartition(item.substring(0, colon), Integer.parseInt(item.substring(colon + 1, eq))),
          Long.parseLong(item.substring(eq + 1)));
    }
    try {
      admin.alterShareGroupOffsets(group, wanted).all().get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      answer.add(encode(group) + "\t!\t" + flat(e.getCause()));
    }
  }

  private static void groupConfigs(Admin admin, List<String> groups, List<String> answer) throws Exception {
    Map<String, ConfigResource> resources = new TreeMap<>();
    groups.forEach(g -> resources.put(g, new ConfigResource(ConfigResource.Type.GROUP, g)));
    Map<ConfigResource, KafkaFuture<Config>> described = admin.describeConfigs(resources.values()).values();
    for (Map.Entry<String, ConfigResource> group : resources.entrySet()) {
      try {
        Config config = described.get(group.getValue()).get(timeoutMs, TimeUnit.MILLISECONDS);
        for (ConfigEntry entry : config.entries()) {
          if (entry.source() == ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG && entry.value() != null) {
            answer.add(encode(group.getKey()) + "\t" + entry.name() + "\t" + encode(entry.value()));
          }
        }
      } catch (ExecutionException e) {
        answer.add(encode(group.getKey()) + "\t!\t" + flat(e.getCause()));
      }
    }
  }

  private static void groupConfigsAlter(Admin admin, String group, String set, String delete, List<String> answer)
      throws Exception {
    List<AlterConfigOp> ops = new ArrayList<>();
    for (String item : set.split(",")) {
      if (!item.isEmpty()) {
        int eq = item.indexOf('=');
        ops.add(new AlterConfigOp(new ConfigEntry(item.substring(0, eq), decode(item.substring(eq + 1))),
            AlterConfigOp.OpType.SET));
      }
    }
    for (String key : delete.split(",")) {
      if (!key.isEmpty()) {
        ops.add(new AlterConfigOp(new ConfigEntry(key, null), AlterConfigOp.OpType.DELETE));
      }
    }
    try {
      admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops))
          .all().get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      answer.add(encode(group) + "\t!\t" + flat(e.getCause()));
    }
  }

  private static String result(KafkaFuture<String> future) {
    try {
      return future.get(timeoutMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      return "!\t" + flat(e.getCause());
    } catch (Exception e) {
      return "!\t" + flat(e);
    }
  }

  private static List<String> groups(String[] f, int from) {
    List<String> out = new ArrayList<>();
    for (int i = from; i < f.length; i++) {
      out.add(decode(f[i]));
    }
    return out;
  }

  private static String flat(Throwable e) {
    String text = e.getClass().getSimpleName() + ": " + e.getMessage();
    return text.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
  }

  private static String encode(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  private static String decode(String s) {
    return URLDecoder.decode(s, StandardCharsets.UTF_8);
  }
}
