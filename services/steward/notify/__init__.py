"""Notifications' adapters (issue 24 "Being told", ADR 0050): the mail and webhook senders, the notifier's
position in the log, and the reading of subscriptions and failed deliveries from the store. What to tell whom
is `steward.domain.notifications` (pure); the durable delivery is `steward_workflows.notifications`."""
