"""The Spark runtime: the session and its JVM, what a submission ships, and where state lives.

`session`, `jvm` (pins, jars, dr-stream's own jar), `submission` and `dist` (spark-submit's
arguments and the packed artifacts), `state_paths` (checkpoint and table URIs through Hadoop's
FileSystem), `delta_reads` (the flow's tables without a JVM), and the Spark column steps the
wings share (`provenance_columns`, `policy_columns`, `local_frame`, `step`).
"""
