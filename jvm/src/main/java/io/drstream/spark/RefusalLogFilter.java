package io.drstream.spark;

import io.drstream.kafka.Refusals;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.Appender;
import org.apache.logging.log4j.core.Filter;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.filter.AbstractFilter;
import org.apache.logging.log4j.core.filter.AbstractFilterable;

/**
 * Keeps Spark's reports of a record the destination refused off the driver's console.
 *
 * <p>A refused record fails the replicate query's task, and Spark reports that failure three
 * times with the whole stack (the task, the lost task, the query). The flow says it instead, in
 * one line that names the record and the broker's reason, and holds the record's partition.
 * Spark's reports of it are recognised by the origin the sink's producer attached to the error
 * ({@code io.drstream.kafka.Refusals}): in the message (a lost task's text) or anywhere in the
 * error's causes and suppressed errors. Every other event passes unchanged.
 *
 * <p>Installed on each appender of the JVM's logging at the flow's start ({@link #install}), not
 * in the log4j2 file: the same file configures JVMs that do not carry this class.
 */
public final class RefusalLogFilter extends AbstractFilter {
  static final String MARK = "dr-stream refused record ";
  // Spark's one-line ERRORs around a failed write (the task's commit aborted, the job aborted, the
  // write aborted): said of a refusal only, while this JVM's producers just reported one.
  private static final String[] ABORT_LINES = {"Aborting commit", "Aborted commit", "Data source write support"};
  private static final long ABORT_WINDOW_MS = 30_000;

  private RefusalLogFilter() {
    super(Filter.Result.DENY, Filter.Result.NEUTRAL);
  }

  /** Adds the filter to every appender of the JVM's logging that has none yet; how many it added. */
  public static int install() {
    LoggerContext context = (LoggerContext) LogManager.getContext(ClassLoader.getSystemClassLoader(), false);
    int added = 0;
    for (Appender appender : context.getConfiguration().getAppenders().values()) {
      if (appender instanceof AbstractFilterable filterable && !has(filterable)) {
        filterable.addFilter(new RefusalLogFilter());
        added++;
      }
    }
    return added;
  }

  private static boolean has(AbstractFilterable filterable) {
    Filter filter = filterable.getFilter();
    if (filter instanceof RefusalLogFilter) {
      return true;
    }
    if (filter instanceof org.apache.logging.log4j.core.filter.CompositeFilter composite) {
      for (Filter f : composite.getFiltersArray()) {
        if (f instanceof RefusalLogFilter) {
          return true;
        }
      }
    }
    return false;
  }

  @Override
  public Filter.Result filter(LogEvent event) {
    String message = event.getMessage() == null ? null : event.getMessage().getFormattedMessage();
    if (refused(message, event.getThrown())) {
      return onMatch;
    }
    return abortOfARefusal(message) && Refusals.refusedWithin(ABORT_WINDOW_MS) ? onMatch : onMismatch;
  }

  /** Whether the line is one Spark says of any failed write, whatever failed it. */
  static boolean abortOfARefusal(String message) {
    if (message == null) {
      return false;
    }
    for (String start : ABORT_LINES) {
      if (message.startsWith(start)) {
        return true;
      }
    }
    return message.matches("(?s).*failed \\d+ times; aborting job.*");
  }

  /** Whether the message or the error names a refused record. */
  static boolean refused(String message, Throwable thrown) {
    if (message != null && message.contains(MARK)) {
      return true;
    }
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    ArrayDeque<Throwable> todo = new ArrayDeque<>();
    if (thrown != null) {
      todo.add(thrown);
    }
    while (!todo.isEmpty() && seen.size() < 64) {
      Throwable t = todo.poll();
      if (!seen.add(t)) {
        continue;
      }
      if (t.getMessage() != null && t.getMessage().contains(MARK)) {
        return true;
      }
      if (t.getCause() != null) {
        todo.add(t.getCause());
      }
      Collections.addAll(todo, t.getSuppressed());
    }
    return false;
  }
}
