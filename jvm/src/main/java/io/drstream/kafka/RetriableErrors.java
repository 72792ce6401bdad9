package io.drstream.kafka;

import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

/**
 * Prints the protocol errors Apache Kafka's Java client treats as retriable, one per line:
 * {@code <code> <name>}, in code order.
 *
 * <p>The client marks an error retriable by the class of its exception (a subclass of
 * {@link RetriableException}): the request may succeed if sent again unchanged, once leadership,
 * a coordinator or metadata has settled. dr-stream's Python clients (librdkafka) flag only some
 * errors so, so their retry rule is generated from this list ({@code dr_stream/kafka/retriable_errors.py})
 * and a test keeps the two equal.
 */
public final class RetriableErrors {
  private RetriableErrors() {}

  public static void main(String[] args) {
    for (Errors error : Errors.values()) {
      if (error.code() > 0 && error.exception() instanceof RetriableException) {
        System.out.println(error.code() + " " + error.name());
      }
    }
  }
}
