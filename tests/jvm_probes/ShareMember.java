import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;

/**
 * A share group member (KIP-932) on Kafka's own Java client, for the share-group tests:
 * {@code ShareMember <bootstrap> <group> <topic> first <partitions>} prints "partition:offset:value"
 * of the first record delivered from each partition (and releases what it took); {@code ... stay
 * <seconds>} stays a member until stdin closes or the time is up, printing "joined" after its
 * first poll.
 */
public class ShareMember {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    p.put("group.id", a[1]);
    p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    p.put("share.acknowledgement.mode", "explicit");
    try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
      c.subscribe(List.of(a[2]));
      switch (a[3]) {
        case "first" -> first(c, Integer.parseInt(a[4]));
        default -> stay(c, Long.parseLong(a[4]));
      }
    }
  }

  static void first(KafkaShareConsumer<byte[], byte[]> c, int partitions) {
    Map<Integer, String> seen = new TreeMap<>();
    while (seen.size() < partitions) {
      for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
        seen.merge(r.partition(), r.offset() + ":" + new String(r.value()),
            (old, now) -> Long.parseLong(old.split(":")[0]) <= r.offset() ? old : now);
        c.acknowledge(r, AcknowledgeType.RELEASE);
      }
    }
    c.commitSync();
    seen.forEach((partition, record) -> System.out.println(partition + ":" + record));
  }

  static void stay(KafkaShareConsumer<byte[], byte[]> c, long seconds) {
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
      if (!said) {
        System.out.println("joined");
        System.out.flush();
        said = true;
      }
    }
  }
}
