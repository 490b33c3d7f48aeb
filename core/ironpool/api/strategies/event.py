"""Event: a report about an object (Kubernetes' core/v1 Event), namespaced, with no rules of its own."""

from __future__ import annotations

from ironpool.api.columns import Column, field, involved, last_seen
from ironpool.api.core import CORE_GROUP, CORE_VERSION, Event
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.strategy import Strategy


class EventStrategy(Strategy[Event]):
    """Only its identity and columns: the model's types are all an Event is checked against."""

    info = ResourceInfo(CORE_GROUP, CORE_VERSION, "Event", "events", "event", ("ev",), True, Event, False)
    columns = (
        Column("LAST SEEN", last_seen), Column("TYPE", field("type")), Column("REASON", field("reason")),
        Column("OBJECT", involved), Column("MESSAGE", field("message")),
        Column("COUNT", field("count"), wide=True), Column("SOURCE", field("source.component"), wide=True),
    )
