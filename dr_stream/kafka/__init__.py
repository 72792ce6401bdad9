"""The Kafka wing: the only code that builds Kafka clients.

`clients` constructs every confluent-kafka client the driver uses and probes reachability;
`spark_options` builds every option map handed to Spark's Kafka source and sink; `admin` and
`groups` are thin helpers over the admin API. Everything else asks these modules, so client
settings are derived in exactly one place.
"""
