"""Process supervision: the embedded nats-server, actor processes, health, restarts, `up`."""
