package io.drstream.spark;

import java.lang.reflect.Method;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.hadoop.util.ShutdownHookManager;

/**
 * When the driver's JVM is told to stop (SIGTERM from a scheduler, a container manager or a
 * signal to the whole process group), lets each running micro-batch end before Spark stops.
 *
 * <p>Spark's own shutdown hook stops the SparkContext at once: a batch still running then fails
 * with its tasks refused by a stopped executor, and so does the Python driver's own Spark work
 * (the offset index's appends), each printing its stack traces. This hook runs before Spark's
 * (Hadoop's hook manager runs hooks by priority, highest first, and Spark registers its own at
 * {@value #SPARK_PRIORITY}). It says {@link #stopping}, which the driver polls; waits for the
 * batch each query is running and stops the query before its next; then waits until the driver
 * calls {@link #released} once its own stop is done. Invariants: the queries get at most the
 * grace given at install, the driver at most {@value #DRIVER_GRACE_MS} ms more; a query still
 * inside a batch after that (or a real-time query, whose batch never ends) is stopped where it
 * is, which the next start's resume filter makes safe; it is installed once per JVM, and a later
 * install only replaces the queries it watches and the grace.
 *
 * <p>Spark's query engine (spark-sql, which jvm/ does not build against) is reached by reflection.
 */
public final class StopBetweenBatches {
  /** Spark's hooks run at Hadoop priority 40 (FileSystem's 10 + 30); ours goes first. */
  static final int SPARK_PRIORITY = 40;

  /** What the driver gets to end its threads and write its last state once the queries stopped. */
  static final long DRIVER_GRACE_MS = 20_000;

  /** How long a stopped query's jobs get at least, past the grace, before they are cancelled. */
  static final long RUN_JOBS_WAIT_MS = 10_000;

  private static final int PRIORITY = SPARK_PRIORITY + 10;
  private static final DateTimeFormatter TIME =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSxxx").withZone(ZoneOffset.UTC);

  private static final CountDownLatch RELEASED = new CountDownLatch(1);
  /** Each query run's stop, by run id: the first caller's; a later caller waits for it. */
  private static final ConcurrentHashMap<String, CountDownLatch> STOPS = new ConcurrentHashMap<>();
  private static volatile boolean stopping;
  private static volatile Object streams;
  private static volatile long graceMs;
  private static volatile String flow = "";
  private static volatile boolean json;
  private static boolean installed;

  private StopBetweenBatches() {}

  /**
   * Watches the queries of {@code streamingQueryManager} (a session's {@code streams()}); waits
   * up to {@code grace} milliseconds for their running batches at shutdown. The one line it
   * prints is {@code flowName}'s, as text or as a JSON object ({@link #line}).
   */
  public static synchronized void install(Object streamingQueryManager, long grace, String flowName,
      boolean jsonLines) {
    streams = streamingQueryManager;
    graceMs = grace;
    flow = flowName;
    json = jsonLines;
    if (!installed) {
      ShutdownHookManager.get()
          .addShutdownHook(StopBetweenBatches::stopAll, PRIORITY, grace + DRIVER_GRACE_MS + 5_000,
              TimeUnit.MILLISECONDS);
      installed = true;
    }
  }

  /** Whether the JVM is shutting down: the driver then stops as it would on its own signal. */
  public static boolean stopping() {
    return stopping;
  }

  /** The driver's stop is done: Spark may stop now. */
  public static void released() {
    RELEASED.countDown();
  }

  static void stopAll() {
    stopping = true;
    stopQueries();
    try {
      RELEASED.await(DRIVER_GRACE_MS, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void stopQueries() {
    Object manager = streams;
    if (manager == null) {
      return;
    }
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(graceMs);
    try {
      for (Object query : (Object[]) manager.getClass().getMethod("active").invoke(manager)) {
        stop(query, Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())), flow, json);
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      // Nothing left to stop gracefully: Spark's own hook stops what is still running.
      System.err.println(line(flow, json, "stopping: could not wait for the running batch: " + e));
    }
  }

  /**
   * A line of the flow's as the driver writes its own: {@code [flow] message} in text; in JSON
   * an object with {@code time} (UTC, ISO 8601, milliseconds), {@code level}, {@code logger},
   * {@code flow} and {@code message}, so a log shipper reads it as any other line of the flow.
   */
  public static String line(String flowName, boolean jsonLine, String message) {
    if (!jsonLine) {
      return "[" + flowName + "] " + message;
    }
    return "{\"time\": \"" + TIME.format(Instant.now()) + "\", \"level\": \"INFO\", \"logger\": \""
        + escaped("dr_stream.flow." + flowName) + "\", \"flow\": \"" + escaped(flowName) + "\", \"message\": \""
        + escaped(message) + "\"}";
  }

  /** The text as a JSON string's content: quotes, backslashes and control characters escaped. */
  private static String escaped(String text) {
    StringBuilder out = new StringBuilder(text.length());
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }

  /**
   * Stops {@code query} (a {@code StreamingQuery}) once the batch it is running has ended, waiting
   * at most {@code graceMs}; at once when it is between batches or the grace is 0.
   *
   * <p>Polling for the end of a batch and then calling {@code stop()} is not enough: while a
   * backlog lasts, the next batch starts as the last one ends, and the stop cancels its tasks
   * (each prints its stack trace). So the query is marked terminated first, the way its own
   * {@code stop()} begins: its batch loop checks that mark before planning a batch and after
   * running one, so the running batch ends and no other starts (a batch still being planned is
   * interrupted before any task runs). Then it waits for the query's thread to end, and stops it.
   *
   * <p>Last, it waits for every job of the query's run to end ({@link #awaitRunJobs}). A batch
   * still being planned when the mark is set is interrupted by Spark after planning, but its job
   * has been submitted by then and goes on writing with no one waiting for it. Until it ends, the
   * destination is not what the next start's resume marks would read.
   */
  public static void stop(Object query, long graceMs, String flowName, boolean jsonLine)
      throws ReflectiveOperationException {
    // The driver and this JVM's shutdown hook both stop the queries when a SIGTERM reaches the
    // whole process group. A second stop must not act on its own: it may find the batch the
    // first is waiting for no longer marked active (a batch stopped during planning still runs
    // its job) while the query's thread is alive, and the query's own stop() would then cancel
    // that job mid-write. It waits for the first stop to end instead.
    String run = String.valueOf(query.getClass().getMethod("runId").invoke(query));
    CountDownLatch mine = new CountDownLatch(1);
    CountDownLatch first = STOPS.putIfAbsent(run, mine);
    if (first != null) {
      awaitQuietly(first, graceMs + Math.max(RUN_JOBS_WAIT_MS, graceMs) + RUN_JOBS_WAIT_MS + 5_000);
      return;
    }
    try {
      stopOnce(query, graceMs, flowName, jsonLine);
    } finally {
      mine.countDown();
    }
  }

  private static void stopOnce(Object query, long graceMs, String flowName, boolean jsonLine)
      throws ReflectiveOperationException {
    Class<?> type = query.getClass();
    long started = System.nanoTime();
    if (graceMs > 0 && isTriggerActive(type.getMethod("status").invoke(query))) {
      System.err.println(line(flowName, jsonLine, "stopping: query " + type.getMethod("name").invoke(query)
          + " finishes its running batch first (up to " + TimeUnit.MILLISECONDS.toSeconds(graceMs) + " s)"));
      if (markTerminated(query)) {
        type.getMethod("awaitTermination", long.class).invoke(query, graceMs);
        // The query is said terminated a moment before its thread ends, and stop() cancels the
        // run's jobs while that thread is alive: that would cancel the job of a batch stopped
        // during planning, which still runs (awaitRunJobs waits for it below).
        awaitThreadEnd(query, graceMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
      } else {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(graceMs);
        long running = lastBatch(query);
        while (isTriggerActive(type.getMethod("status").invoke(query)) && lastBatch(query) == running
            && System.nanoTime() < deadline) {
          sleep(20);
        }
      }
    }
    type.getMethod("stop").invoke(query);
    long waitMs = Math.max(RUN_JOBS_WAIT_MS, graceMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
    if (!awaitRunJobs(query, waitMs)) {
      System.err.println(line(flowName, jsonLine, "stopping: the last batch of query " + type.getMethod("name").invoke(query)
          + " still ran " + TimeUnit.MILLISECONDS.toSeconds(waitMs) + " s after the stop and was cancelled;"
          + " records it had sent may be written again when the query next starts"));
    }
  }

  /**
   * Waits up to {@code timeoutMs} until no job of the query's run (Spark runs a query's jobs in
   * a job group named after its run id) is running; cancels them past that. False when it had to
   * cancel. The status tracker learns of jobs from Spark's event bus, after the scheduler has
   * taken them: a one-task job submitted here first makes sure every job submitted before it is
   * known (the scheduler takes submissions in order, and the bus delivers its events in order).
   */
  static boolean awaitRunJobs(Object query, long timeoutMs) throws ReflectiveOperationException {
    Object session = query.getClass().getMethod("sparkSession").invoke(query);
    Object context = session.getClass().getMethod("sparkContext").invoke(session);
    String group = String.valueOf(query.getClass().getMethod("runId").invoke(query));
    Object tracker = context.getClass().getMethod("statusTracker").invoke(context);
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    String fence = fenceJob(context);
    while (!ended(tracker, fence) && System.nanoTime() < deadline) {
      sleep(10);
    }
    while (running(tracker, group) && System.nanoTime() < deadline) {
      sleep(20);
    }
    if (!running(tracker, group)) {
      return true;
    }
    context.getClass().getMethod("cancelJobGroup", String.class).invoke(context, group);
    long cancelled = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RUN_JOBS_WAIT_MS);
    while (running(tracker, group) && System.nanoTime() < cancelled) {
      sleep(20);
    }
    return false;
  }

  /** Runs a one-task job in a job group of its own, and names that group. */
  private static String fenceJob(Object context) throws ReflectiveOperationException {
    Class<?> type = context.getClass();
    Method get = type.getMethod("getLocalProperty", String.class);
    Method set = type.getMethod("setLocalProperty", String.class, String.class);
    String[] keys = {"spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"};
    Object[] kept = new Object[keys.length];
    for (int i = 0; i < keys.length; i++) {
      kept[i] = get.invoke(context, keys[i]);
    }
    String group = "dr-stream-stop-fence-" + UUID.randomUUID();
    type.getMethod("setJobGroup", String.class, String.class, boolean.class)
        .invoke(context, group, "dr-stream: every job submitted before this one is known", false);
    try {
      Object rdd = type.getMethod("range", long.class, long.class, long.class, int.class)
          .invoke(context, 0L, 1L, 1L, 1);
      rdd.getClass().getMethod("count").invoke(rdd);
    } finally {
      for (int i = 0; i < keys.length; i++) {
        set.invoke(context, keys[i], kept[i]);
      }
    }
    return group;
  }

  /** Whether the tracker knows the group's jobs and none of them runs any more. */
  private static boolean ended(Object tracker, String group) throws ReflectiveOperationException {
    int[] jobs = jobs(tracker, group);
    for (int job : jobs) {
      String status = status(tracker, job);
      if (status == null || status.equals("RUNNING") || status.equals("UNKNOWN")) {
        return false;
      }
    }
    return jobs.length > 0;
  }

  private static boolean running(Object tracker, String group) throws ReflectiveOperationException {
    for (int job : jobs(tracker, group)) {
      if ("RUNNING".equals(status(tracker, job))) {
        return true;
      }
    }
    return false;
  }

  private static int[] jobs(Object tracker, String group) throws ReflectiveOperationException {
    return (int[]) tracker.getClass().getMethod("getJobIdsForGroup", String.class).invoke(tracker, group);
  }

  /** The job's status name, or null when the tracker does not know it (yet, or any more). */
  private static String status(Object tracker, int job) throws ReflectiveOperationException {
    Object known = tracker.getClass().getMethod("getJobInfo", int.class).invoke(tracker, job);
    if (!(Boolean) known.getClass().getMethod("isDefined").invoke(known)) {
      return null;
    }
    Object info = known.getClass().getMethod("get").invoke(known);
    Class<?> type = Class.forName("org.apache.spark.SparkJobInfo", false, info.getClass().getClassLoader());
    return String.valueOf(type.getMethod("status").invoke(info));
  }

  /** Sets the query's own state to TERMINATED; false where this Spark keeps it elsewhere. */
  private static boolean markTerminated(Object query) {
    try {
      Object execution = query.getClass().getMethod("streamingQuery").invoke(query);
      Method state = execution.getClass().getMethod("state");
      String states = state.getGenericReturnType().getTypeName().replaceAll(".*<(.*)\\.State>$", "$1");
      Object terminated = Class.forName(states + ".TERMINATED$").getField("MODULE$").get(null);
      @SuppressWarnings("unchecked")
      AtomicReference<Object> ref = (AtomicReference<Object>) state.invoke(execution);
      ref.set(terminated);
      return true;
    } catch (ReflectiveOperationException | ClassCastException e) {
      return false;
    }
  }

  private static void awaitThreadEnd(Object query, long ms) {
    try {
      Object execution = query.getClass().getMethod("streamingQuery").invoke(query);
      Thread thread = (Thread) execution.getClass().getMethod("queryExecutionThread").invoke(execution);
      thread.join(Math.max(1, ms));
    } catch (ReflectiveOperationException | ClassCastException e) {
      // Another Spark: stop() as before.
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void awaitQuietly(CountDownLatch latch, long ms) {
    try {
      latch.await(ms, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static long lastBatch(Object query) throws ReflectiveOperationException {
    Object progress = query.getClass().getMethod("lastProgress").invoke(query);
    return progress == null ? -1 : (Long) progress.getClass().getMethod("batchId").invoke(progress);
  }

  private static boolean isTriggerActive(Object status) throws ReflectiveOperationException {
    return (Boolean) status.getClass().getMethod("isTriggerActive").invoke(status);
  }
}
