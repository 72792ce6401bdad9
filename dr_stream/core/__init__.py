"""The pure core: the rules every other floor builds on, with no Spark and no Kafka client.

`config` (the typed flow config, its keys declared once in tables that `config_def` reads),
`policy` (which topics and groups, and their names on the destination), `contracts` (internal
names and record formats shared with the JVM), `provenance` (the header read from single
records), `lag` (records and time behind), `librdkafka_settings` (Java client properties ->
librdkafka's). Importing any of them starts nothing and opens nothing, so their tests are plain
unit tests.
"""
