package io.drstream.kafka;

import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;

/**
 * Runs an action when the Spark task on the calling thread completes, successfully or not.
 *
 * <p>Reached by reflection so the interceptor needs no Spark jars to build and still works in a
 * plain Kafka producer (there it never registers anything). Invariant: an action is registered at
 * most once per task attempt, and runs on the task's thread after the task's own work (Spark's
 * Kafka writer has flushed its producer by then), so its failure fails the task.
 */
final class TaskEnd {
  private static final Method GET;
  private static final Method ATTEMPT_ID;
  private static final Method ADD_LISTENER;
  private static final Class<?> LISTENER;

  static {
    Method get = null;
    Method attempt = null;
    Method add = null;
    Class<?> listener = null;
    try {
      Class<?> context = Class.forName("org.apache.spark.TaskContext");
      listener = Class.forName("org.apache.spark.util.TaskCompletionListener");
      get = context.getMethod("get");
      attempt = context.getMethod("taskAttemptId");
      add = context.getMethod("addTaskCompletionListener", listener);
    } catch (ReflectiveOperationException | LinkageError e) {
      get = null;
    }
    GET = get;
    ATTEMPT_ID = attempt;
    ADD_LISTENER = add;
    LISTENER = listener;
  }

  private final Set<Long> registered = Collections.synchronizedSet(new HashSet<>());

  /** True when the calling thread runs a Spark task (the action is then registered for its end). */
  boolean onEndOfCurrentTask(Runnable action) {
    if (GET == null) {
      return false;
    }
    try {
      Object context = GET.invoke(null);
      if (context == null) {
        return false;
      }
      long attempt = (Long) ATTEMPT_ID.invoke(context);
      if (!registered.add(attempt)) {
        return true;
      }
      Object listener = Proxy.newProxyInstance(LISTENER.getClassLoader(), new Class<?>[] {LISTENER},
          (proxy, method, args) -> {
            switch (method.getName()) {
              case "onTaskCompletion":
                registered.remove(attempt);
                action.run();
                return null;
              case "hashCode":
                return System.identityHashCode(proxy);
              case "equals":
                return proxy == args[0];
              case "toString":
                return "dr-stream offset-run publication for task attempt " + attempt;
              default:
                return null;
            }
          });
      ADD_LISTENER.invoke(context, listener);
      return true;
    } catch (ReflectiveOperationException e) {
      return false;
    }
  }
}
