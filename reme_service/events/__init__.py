"""Change events: what each request changed (its audit trail) and finished jobs, published to server-sent-event
subscribers (`GET /events`) and to configured webhooks (signed, retried, logged). docs/events.md."""
