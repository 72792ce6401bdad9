import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingFile;

/**
 * Folds a flight recording's execution samples into collapsed stacks, one file per time window,
 * for `make profile` (bench/cpu_profile.py). Run as a source file, so the bench needs no build:
 *
 * <pre>java bench/JfrStacks.java RECORDING OUT_DIR NAME=FROM_EPOCH_MS:TO_EPOCH_MS ...</pre>
 *
 * Writes OUT_DIR/NAME.folded for each window: one line per distinct (thread, stack),
 * "os thread id TAB thread name TAB root;...;leaf TAB samples". A frame is the method's class
 * and name; a stack the recorder cut at its depth starts with "[truncated]". Only
 * jdk.ExecutionSample counts: it samples threads running Java code, so its counts follow CPU,
 * where jdk.NativeMethodSample mostly finds threads waiting on a socket.
 */
public final class JfrStacks {
    private record Window(String name, long from, long to, Map<String, Long> counts) {}

    public static void main(String[] args) throws IOException {
        if (args.length < 3) {
            System.err.println("usage: java JfrStacks.java RECORDING OUT_DIR NAME=FROM_MS:TO_MS ...");
            System.exit(2);
        }
        List<Window> windows = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            String[] nameRange = args[i].split("=", 2);
            String[] range = nameRange[1].split(":", 2);
            windows.add(new Window(nameRange[0], Long.parseLong(range[0]), Long.parseLong(range[1]), new HashMap<>()));
        }
        try (RecordingFile recording = new RecordingFile(Path.of(args[0]))) {
            while (recording.hasMoreEvents()) {
                RecordedEvent event = recording.readEvent();
                if (!event.getEventType().getName().equals("jdk.ExecutionSample")) {
                    continue;
                }
                long at = event.getStartTime().toEpochMilli();
                String key = null;
                for (Window window : windows) {
                    if (at >= window.from() && at < window.to()) {
                        key = key != null ? key : key(event);
                        window.counts().merge(key, 1L, Long::sum);
                    }
                }
            }
        }
        Path out = Path.of(args[1]);
        Files.createDirectories(out);
        for (Window window : windows) {
            try (PrintWriter writer = new PrintWriter(Files.newBufferedWriter(out.resolve(window.name() + ".folded")))) {
                window.counts().forEach((stack, n) -> writer.println(stack + "\t" + n));
            }
        }
    }

    private static String key(RecordedEvent event) {
        RecordedThread thread = event.getThread("sampledThread");
        StringBuilder line = new StringBuilder();
        line.append(thread == null ? -1 : thread.getOSThreadId()).append('\t');
        line.append(thread == null ? "?" : String.valueOf(thread.getJavaName()).replace('\t', ' ')).append('\t');
        RecordedStackTrace stack = event.getStackTrace();
        if (stack == null) {
            return line.append("[no stack]").toString();
        }
        if (stack.isTruncated()) {
            line.append("[truncated];");
        }
        List<RecordedFrame> frames = stack.getFrames();  // leaf first
        for (int i = frames.size() - 1; i >= 0; i--) {
            RecordedFrame frame = frames.get(i);
            line.append(frame.getMethod().getType().getName()).append('.').append(frame.getMethod().getName());
            if (i > 0) {
                line.append(';');
            }
        }
        return line.toString();
    }
}
