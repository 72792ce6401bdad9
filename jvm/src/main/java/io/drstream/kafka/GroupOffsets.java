package io.drstream.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

/**
 * Many consumer groups' committed offsets read and written in a few admin requests.
 *
 * <p>Apache Kafka's Java admin client batches an offset fetch for many groups into one request
 * per group coordinator (OffsetFetch v8), finds all those coordinators in one request, and
 * retries on its own while a coordinator moves. Commits go one group per request, over several
 * clients at once. librdkafka's admin API takes one group per call
 * and dies when a coordinator moves, so dr-stream's control loops come here for their rounds.
 *
 * <p>Values cross to Python as text, one line per item and tab-separated fields, so a round is
 * one call through the gateway however many groups it covers:
 *
 * <ul>
 *   <li>{@link #committed}: {@code group TAB topic TAB partition TAB offset TAB metadata} per
 *       committed offset, or {@code group TAB ! TAB error} for a group whose fetch failed;
 *   <li>{@link #committedChanges}: the same lines, only those whose offset or metadata differ
 *       from what the previous call of this client returned for that group and partition (a
 *       poller's idle round at thousands of groups then hands Python nothing to parse);
 *   <li>{@link #commit}: takes {@code group TAB topic TAB partition TAB offset} lines and answers
 *       {@code group TAB error} for each group whose commit failed (nothing when all succeeded).
 * </ul>
 *
 * <p>Tabs and line breaks inside a metadata string or an error are replaced by spaces.
 *
 * <p>A commit's metadata goes out ending in one NUL character ({@link #onTheWire}), and a fetched
 * metadata loses it again ({@link #asWritten}). librdkafka keeps a fetched metadata as bytes and
 * a length, and confluent-kafka-python reads those bytes as a C string, up to the first NUL it
 * finds: metadata without one was read on into whatever memory followed, so dr-stream's own
 * commits came back from the command line garbled, or did not decode at all. With the NUL, the
 * bytes on the wire are those librdkafka's own writers commit (their length counts the C
 * string's terminator), and every reader finds the same text.
 */
public final class GroupOffsets implements AutoCloseable {
  // OffsetCommit names one group, and an admin client keeps one request in flight per
  // connection: thousands of groups committed through one client wait out each other's round
  // trips (5,000 took 14 s on one broker). A round's commits are spread over up to WRITERS
  // clients, each with a connection of its own; the first is the reading client.
  private static final int WRITERS = 8;
  private static final String NUL = "\u0000";
  private final Properties props;
  private final List<Admin> writers = new ArrayList<>();
  private final Admin admin;
  // group -> (topic TAB partition -> offset TAB metadata), as committedChanges last returned it;
  // only for the groups the last call asked for, so groups that come and go leave nothing behind
  private final Map<String, Map<String, String>> lastReturned = new HashMap<>();

  public GroupOffsets(Map<String, String> properties, int timeoutMs) {
    Properties props = new Properties();
    props.putAll(properties);
    props.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs));
    props.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs));
    props.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, "dr-stream-group-offsets");
    this.props = props;
    this.admin = Admin.create(props);
    writers.add(admin);
  }

  private Admin writer(int index) {
    while (writers.size() <= index) {
      Properties own = new Properties();
      own.putAll(props);
      own.put(AdminClientConfig.CLIENT_ID_CONFIG, props.get(AdminClientConfig.CLIENT_ID_CONFIG) + "-" + writers.size());
      writers.add(Admin.create(own));
    }
    return writers.get(index);
  }

  /** Every consumer group the cluster lists, one id per line. */
  public String listGroups(int timeoutMs) throws Exception {
    StringBuilder out = new StringBuilder();
    for (ConsumerGroupListing listing : admin.listConsumerGroups().all().get(timeoutMs, TimeUnit.MILLISECONDS)) {
      out.append(listing.groupId()).append('\n');
    }
    return out.toString();
  }

  /**
   * The state and member count of the groups named one per line in {@code groups}, one request
   * per coordinator for all the groups it holds: {@code group\tSTATE\tmembers} per group, or
   * {@code group\t!\terror}.
   */
  public String states(String groups, int timeoutMs) throws InterruptedException {
    List<String> names = lines(groups);
    if (names.isEmpty()) {
      return "";
    }
    Map<String, KafkaFuture<ConsumerGroupDescription>> futures =
        new TreeMap<>(admin.describeConsumerGroups(names).describedGroups());
    StringBuilder out = new StringBuilder();
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    for (Map.Entry<String, KafkaFuture<ConsumerGroupDescription>> entry : futures.entrySet()) {
      String group = entry.getKey();
      try {
        ConsumerGroupDescription described = entry.getValue().get(left(deadline), TimeUnit.NANOSECONDS);
        out.append(group).append('\t').append(described.state().name()).append('\t')
            .append(described.members().size()).append('\n');
      } catch (ExecutionException e) {
        out.append(group).append("\t!\t").append(describe(e.getCause())).append('\n');
      } catch (java.util.concurrent.TimeoutException e) {
        out.append(group).append("\t!\ttimed out after ").append(timeoutMs).append(" ms\n");
      }
    }
    return out.toString();
  }

  /** The committed offsets of the groups named one per line in {@code groups}. */
  public String committed(String groups, int timeoutMs) throws InterruptedException {
    return fetch(groups, timeoutMs, false);
  }

  /** {@link #committed}, less the offsets that have not changed since the previous call. */
  public String committedChanges(String groups, int timeoutMs) throws InterruptedException {
    return fetch(groups, timeoutMs, true);
  }

  private String fetch(String groups, int timeoutMs, boolean changesOnly) throws InterruptedException {
    Map<String, ListConsumerGroupOffsetsSpec> specs = new HashMap<>();
    for (String group : lines(groups)) {
      specs.put(group, new ListConsumerGroupOffsetsSpec());
    }
    StringBuilder out = new StringBuilder();
    if (changesOnly) {
      lastReturned.keySet().retainAll(specs.keySet());
    }
    if (specs.isEmpty()) {
      return "";
    }
    Map<String, KafkaFuture<Map<TopicPartition, OffsetAndMetadata>>> futures = new TreeMap<>();
    var result = admin.listConsumerGroupOffsets(specs);
    for (String group : specs.keySet()) {
      futures.put(group, result.partitionsToOffsetAndMetadata(group));
    }
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    for (Map.Entry<String, KafkaFuture<Map<TopicPartition, OffsetAndMetadata>>> entry : futures.entrySet()) {
      String group = entry.getKey();
      try {
        Map<TopicPartition, OffsetAndMetadata> offsets = entry.getValue().get(left(deadline), TimeUnit.NANOSECONDS);
        Map<String, String> before = lastReturned.getOrDefault(group, Map.of());
        Map<String, String> now = new HashMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> o : offsets.entrySet()) {
          if (o.getValue() == null) {
            continue;
          }
          String partition = o.getKey().topic() + '\t' + o.getKey().partition();
          String what = o.getValue().offset() + "\t" + clean(asWritten(o.getValue().metadata()));
          now.put(partition, what);
          if (changesOnly && what.equals(before.get(partition))) {
            continue;
          }
          out.append(group).append('\t').append(partition).append('\t').append(what).append('\n');
        }
        if (changesOnly) {
          lastReturned.put(group, now);
        }
      } catch (ExecutionException e) {
        out.append(group).append("\t!\t").append(describe(e.getCause())).append('\n');
      } catch (java.util.concurrent.TimeoutException e) {
        out.append(group).append("\t!\ttimed out after ").append(timeoutMs).append(" ms\n");
      }
    }
    return out.toString();
  }

  /** Commits the offsets in {@code offsets} with {@code metadata}, all groups at once. */
  public String commit(String offsets, String metadata, int timeoutMs) throws InterruptedException {
    Map<String, Map<TopicPartition, OffsetAndMetadata>> byGroup = new TreeMap<>();
    for (String line : lines(offsets)) {
      String[] f = line.split("\t");
      byGroup.computeIfAbsent(f[0], g -> new HashMap<>())
          .put(new TopicPartition(f[1], Integer.parseInt(f[2])), new OffsetAndMetadata(Long.parseLong(f[3]), onTheWire(metadata)));
    }
    Map<String, KafkaFuture<Void>> futures = new TreeMap<>();
    int spread = Math.min(WRITERS, byGroup.size());
    int n = 0;
    for (Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>> entry : byGroup.entrySet()) {
      Admin client = writer(n++ % spread);
      futures.put(entry.getKey(), client.alterConsumerGroupOffsets(entry.getKey(), entry.getValue()).all());
    }
    StringBuilder out = new StringBuilder();
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    for (Map.Entry<String, KafkaFuture<Void>> entry : futures.entrySet()) {
      try {
        entry.getValue().get(left(deadline), TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        out.append(entry.getKey()).append('\t').append(describe(e.getCause())).append('\n');
      } catch (java.util.concurrent.TimeoutException e) {
        out.append(entry.getKey()).append("\ttimed out after ").append(timeoutMs).append(" ms\n");
      }
    }
    return out.toString();
  }

  @Override
  public void close() {
    for (Admin client : writers) {
      client.close(Duration.ofSeconds(5));
    }
  }

  private static long left(long deadline) {
    return Math.max(TimeUnit.MILLISECONDS.toNanos(1), deadline - System.nanoTime());
  }

  private static List<String> lines(String text) {
    List<String> out = new ArrayList<>();
    for (String line : text.split("\n")) {
      if (!line.isEmpty()) {
        out.add(line);
      }
    }
    return out;
  }

  /** The metadata a commit carries: {@code metadata} and one NUL, which every reader stops at. */
  static String onTheWire(String metadata) {
    return metadata.endsWith(NUL) ? metadata : metadata + NUL;
  }

  /** A fetched metadata as its writer gave it: {@link #onTheWire}'s inverse, for either kind of writer. */
  static String asWritten(String metadata) {
    return metadata != null && metadata.endsWith(NUL) ? metadata.substring(0, metadata.length() - 1) : metadata;
  }

  private static String clean(String text) {
    return text == null ? "" : text.replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
  }

  private static String describe(Throwable error) {
    return clean(error.getClass().getSimpleName() + ": " + error.getMessage());
  }
}
