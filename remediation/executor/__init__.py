"""The executor: action records in, a durable lifecycle, policy decisions; later the Admin API."""
