"""dr-stream: disaster-recovery replication for Apache Kafka on Spark Structured Streaming."""

__version__ = "0.2.0"
