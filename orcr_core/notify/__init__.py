"""Notifications: rules over the event log, delivered through sink plugins.

``rules`` turns one event row into the notifications it is worth (pure, import
light); ``outbox`` is the durable part in the server: a matcher that rides the
event table with its own persisted cursor (pinning retention like a watch) and
writes one ``notification`` row per sink in the same transaction that moves the
cursor, and one delivery thread per sink (gather, rate limit, digest, retry
with backoff, undeliverable). The sinks themselves (webhook, command, desktop,
herdr) are plugins (``register_notify_sinks``); ``plugins/notify`` bundles four.
"""
