package io.drstream.kafka;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.ref.WeakReference;
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
 *
 * <p>It is asked for every record sent: a thread that asks again within the task it registered
 * for is answered from its own memory of that task, with one handle call and no lock.
 */
final class TaskEnd {
  private static final MethodHandle CURRENT;
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
    MethodHandle current = null;
    if (get != null) {
      try {
        current = MethodHandles.publicLookup().unreflect(get);
      } catch (IllegalAccessException e) {
        current = null;
      }
    }
    CURRENT = current;
    ATTEMPT_ID = attempt;
    ADD_LISTENER = add;
    LISTENER = listener;
  }

  private final Set<Long> registered = Collections.synchronizedSet(new HashSet<>());
  // The task context this thread last registered for (weakly: a finished task's context is not kept).
  private final ThreadLocal<WeakReference<Object>> lastRegistered = new ThreadLocal<>();

  /** True when the calling thread runs a Spark task (the action is then registered for its end). */
  boolean onEndOfCurrentTask(Runnable action) {
    if (CURRENT == null) {
      return false;
    }
    try {
      Object context = CURRENT.invoke();
      if (context == null) {
        return false;
      }
      WeakReference<Object> last = lastRegistered.get();
      if (last != null && last.get() == context) {
        return true;
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
      lastRegistered.set(new WeakReference<>(context));
      return true;
    } catch (Throwable e) {
      return false;
    }
  }
}
