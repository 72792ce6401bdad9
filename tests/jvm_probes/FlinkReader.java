import java.util.*;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;
import org.apache.kafka.common.TopicPartition;

/**
 * A Flink 2 job on Flink's own Kafka source, started without its old state from offsets an
 * operator hands it, as a job moved to another cluster is:
 * {@code FlinkReader <bootstrap> <topic> 0:350,1:400} reads each partition from its offset to the
 * partition's end as it was at the start (a bounded source), in a local mini-cluster, and prints
 * each record's value on a line of its own.
 */
public class FlinkReader {
  public static void main(String[] a) throws Exception {
    Map<TopicPartition, Long> from = new HashMap<>();
    for (String entry : a[2].split(",")) {
      String[] po = entry.split(":");
      from.put(new TopicPartition(a[1], Integer.parseInt(po[0])), Long.parseLong(po[1]));
    }
    KafkaSource<String> source = KafkaSource.<String>builder()
        .setBootstrapServers(a[0])
        .setTopics(a[1])
        .setStartingOffsets(OffsetsInitializer.offsets(from))
        .setBounded(OffsetsInitializer.latest())
        .setValueOnlyDeserializer(new SimpleStringSchema())
        .build();
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(1);
    try (CloseableIterator<String> values =
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "resumed").executeAndCollect()) {
      while (values.hasNext()) {
        System.out.println(values.next());
      }
    }
  }
}
