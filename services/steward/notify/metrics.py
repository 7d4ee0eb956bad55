"""The notifier's Prometheus metrics (served by the worker's metrics port; docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

DELIVERED = Counter("steward_notifications_delivered_total", "Notification deliveries accepted by the receiver",
                    ["channel", "kind"])
ATTEMPTS_FAILED = Counter("steward_notification_attempts_failed_total",
                          "Notification delivery attempts that failed (each is retried until it gives up)",
                          ["channel", "retryable"])
GAVE_UP = Counter("steward_notifications_failed_total", "Notification deliveries given up (recorded as "
                  "NotificationFailed; `steward notify failed` lists them)", ["channel", "kind"])
STARTED = Counter("steward_notifications_started_total", "Notification deliveries handed to Temporal",
                  ["channel", "kind"])
POSITION = Gauge("steward_notifier_position", "The last log position the notifier handed on")
LAG = Gauge("steward_notifier_lag_events", "Events recorded after the notifier's position")
