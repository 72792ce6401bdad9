import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;

/**
 * A consumer group member on Kafka's own Java client, for the group-protocol tests:
 * {@code GroupMember <bootstrap> <group> <topic> <protocol> commit 0:40,1:77} reads each partition up
 * to its offset and commits there; {@code ... first <partitions>} prints "p:offset" of the first record
 * it reads in each partition, committing nothing; {@code ... stay <seconds>} stays a member (printing
 * "joined" once it has partitions) until stdin closes or the time is up. {@code protocol}: classic or
 * consumer (KIP-848).
 */
public class GroupMember {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    p.put("group.id", a[1]);
    p.put("group.protocol", a[3]);
    p.put("enable.auto.commit", "false");
    p.put("auto.offset.reset", "earliest");
    p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
      c.subscribe(List.of(a[2]));
      switch (a[4]) {
        case "commit" -> commit(c, a[2], a[5]);
        case "first" -> first(c, Integer.parseInt(a[5]));
        default -> stay(c, Long.parseLong(a[5]));
      }
    }
  }

  static void commit(KafkaConsumer<byte[], byte[]> c, String topic, String targets) {
    Map<TopicPartition, OffsetAndMetadata> wanted = new HashMap<>();
    for (String t : targets.split(",")) {
      String[] pair = t.split(":");
      wanted.put(new TopicPartition(topic, Integer.parseInt(pair[0])), new OffsetAndMetadata(Long.parseLong(pair[1])));
    }
    Set<TopicPartition> reached = new HashSet<>();
    while (reached.size() < wanted.size()) {
      for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
        TopicPartition tp = new TopicPartition(r.topic(), r.partition());
        if (wanted.containsKey(tp) && r.offset() >= wanted.get(tp).offset() - 1) {
          reached.add(tp);
        }
      }
    }
    c.commitSync(wanted);
    System.out.println("committed " + targets);
  }

  static void first(KafkaConsumer<byte[], byte[]> c, int partitions) {
    Map<Integer, Long> seen = new TreeMap<>();
    while (seen.size() < partitions) {
      for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
        seen.putIfAbsent(r.partition(), r.offset());
      }
    }
    seen.forEach((partition, offset) -> System.out.println(partition + ":" + offset));
  }

  static void stay(KafkaConsumer<byte[], byte[]> c, long seconds) {
    long end = System.currentTimeMillis() + seconds * 1000;
    java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();
    Thread stdin = new Thread(() -> {
      try {
        while (System.in.read() >= 0) { }
      } catch (java.io.IOException e) {
        // closed either way
      }
      closed.set(true);
    });
    stdin.setDaemon(true);
    stdin.start();
    boolean said = false;
    while (System.currentTimeMillis() < end && !closed.get()) {
      c.poll(Duration.ofMillis(200));
      if (!said && !c.assignment().isEmpty()) {
        System.out.println("joined");
        System.out.flush();
        said = true;
      }
    }
  }
}
