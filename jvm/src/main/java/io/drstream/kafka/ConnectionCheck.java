package io.drstream.kafka;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

/**
 * Connects Apache Kafka's Java admin client to a cluster with the flow's Java client
 * properties, exactly as Spark's connector will, and prints one line: {@code ok <cluster.id>}
 * or {@code error <exception class>: <message>}.
 *
 * <p>Usage: {@code ConnectionCheck <properties file> <timeout seconds>}. The properties file
 * holds {@code bootstrap.servers} and the flow's {@code kafka:} map; it may hold secrets, so
 * the caller writes it privately and deletes it. Exit code 0 when reached, 1 otherwise.
 */
public final class ConnectionCheck {
  private ConnectionCheck() {}

  public static void main(String[] args) throws IOException {
    Properties properties = new Properties();
    try (InputStream in = new FileInputStream(args[0])) {
      properties.load(in);
    }
    int timeoutMs = (int) (Double.parseDouble(args[1]) * 1000);
    properties.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs));
    properties.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Integer.toString(timeoutMs));
    Admin admin;
    try {
      admin = Admin.create(properties);
    } catch (RuntimeException e) {
      System.out.println("error " + describe(e));
      System.exit(1);
      return;
    }
    int status = 1;
    try {
      String id = admin.describeCluster().clusterId().get(timeoutMs, TimeUnit.MILLISECONDS);
      System.out.println("ok " + id);
      status = 0;
    } catch (ExecutionException e) {
      System.out.println("error " + describe(e.getCause()));
    } catch (Exception e) {
      System.out.println("error " + describe(e));
    } finally {
      admin.close(java.time.Duration.ofSeconds(2));
    }
    System.exit(status);
  }

  private static String describe(Throwable error) {
    Throwable cause = error;
    // A configuration error often wraps the one that says what is wrong (a missing file).
    while (cause.getCause() != null && cause.getMessage() != null && cause.getCause().getMessage() != null
        && !(cause instanceof org.apache.kafka.common.errors.AuthenticationException)) {
      cause = cause.getCause();
    }
    String message = String.valueOf(cause.getMessage()).replace('\n', ' ');
    return cause.getClass().getSimpleName() + ": " + message;
  }
}
