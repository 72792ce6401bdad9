import java.nio.file.Files;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * A Kafka Streams application on Kafka's own library, for the Streams-group tests:
 * {@code StreamsApp <bootstrap> <application.id> <topic> <protocol> <seconds>} runs a stateless
 * topology over the topic, printing "running" once it runs and "partition:offset:value" for each
 * record it processes, committing every 100 ms, until stdin closes or the time is up.
 * {@code protocol}: streams (KIP-1071, the group's own protocol) or classic. A sixth argument
 * {@code paused}: the application joins its group and processes nothing.
 */
public class StreamsApp {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a[0]);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, a[1]);
    p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, a[3]);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("streams-app").toString());
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArray().getClass());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArray().getClass());
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    StreamsBuilder builder = new StreamsBuilder();
    builder.<byte[], byte[]>stream(a[2]).process(Printed::new);
    AtomicBoolean closed = new AtomicBoolean();
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
    try (KafkaStreams streams = new KafkaStreams(builder.build(), p)) {
      streams.setStateListener((now, before) -> {
        if (now == KafkaStreams.State.RUNNING) {
          say("running");
        }
      });
      if (a.length > 5 && "paused".equals(a[5])) {
        streams.pause();  // a member of the group that processes (and commits) nothing
      }
      streams.start();
      long end = System.currentTimeMillis() + Long.parseLong(a[4]) * 1000;
      while (System.currentTimeMillis() < end && !closed.get()) {
        Thread.sleep(100);
      }
    }
  }

  static synchronized void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  static final class Printed implements Processor<byte[], byte[], Void, Void> {
    private ProcessorContext<Void, Void> context;

    @Override
    public void init(ProcessorContext<Void, Void> context) {
      this.context = context;
    }

    @Override
    public void process(Record<byte[], byte[]> record) {
      context.recordMetadata().ifPresent(m -> say(m.partition() + ":" + m.offset() + ":" + new String(record.value())));
    }
  }
}
