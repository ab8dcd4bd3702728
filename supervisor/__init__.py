"""Process management: the embedded nats-server, actor processes, health, and the CLI."""
