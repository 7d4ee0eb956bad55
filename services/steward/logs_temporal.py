"""The correlation id across Temporal: a client and worker interceptor (one object, both roles).

- Client side (dispatcher, anything holding the client): starting a workflow, signalling it or sending an
  update puts the current correlation id into the call's Temporal headers.
- Workflow side: a run takes its id from its start headers (or, for runs started before this existed, from
  a `correlation_id` field of its input) and passes it on in the headers of every activity, local activity
  and child workflow it starts; signal and update handlers run under the id their caller sent.
- Activity side: each activity runs under the id from its headers (or its input's `correlation_id`), so
  every line the executor or the worker logs for it carries the id; one line per finished activity.

Workflows are deterministic: this module only reads headers and arguments, never a clock, and logs only
when the run is not replaying history.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import temporalio.client
import temporalio.converter
import temporalio.worker
from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload

from steward.logs import correlation, current

HEADER = "steward-correlation-id"
# activities that are long polls: a line each time would be noise at INFO
QUIET_ACTIVITIES = frozenset({"watch_job"})

log = logging.getLogger("steward.temporal")


def _encode(cid: str) -> Payload:
    return temporalio.converter.PayloadConverter.default.to_payload(cid)


def from_headers(headers: Mapping[str, Payload]) -> str | None:
    payload = headers.get(HEADER)
    if payload is None:
        return None
    try:
        value = temporalio.converter.PayloadConverter.default.from_payload(payload, str)
    except Exception:  # a header someone else wrote: ignore it rather than fail the call
        return None
    return value if isinstance(value, str) and value else None


def from_args(args: Sequence[Any]) -> str | None:
    """The `correlation_id` field of the first argument that has one (workflow and activity inputs)."""
    for arg in args:
        value = getattr(arg, "correlation_id", None)
        if isinstance(value, str) and value:
            return value
    return None


def with_header(headers: Mapping[str, Payload], cid: str | None) -> Mapping[str, Payload]:
    if not cid or HEADER in headers:
        return headers
    return {**headers, HEADER: _encode(cid)}


class CorrelationInterceptor(temporalio.client.Interceptor, temporalio.worker.Interceptor):
    """Pass it to `Client.connect(interceptors=[...])`: workers built on that client use it too."""

    def intercept_client(self, next: temporalio.client.OutboundInterceptor) -> temporalio.client.OutboundInterceptor:
        return _ClientOutbound(next)

    def intercept_activity(self, next: temporalio.worker.ActivityInboundInterceptor
                           ) -> temporalio.worker.ActivityInboundInterceptor:
        return _ActivityInbound(next)

    def workflow_interceptor_class(self, input: temporalio.worker.WorkflowInterceptorClassInput
                                   ) -> type[temporalio.worker.WorkflowInboundInterceptor]:
        return _WorkflowInbound


class _ClientOutbound(temporalio.client.OutboundInterceptor):
    async def start_workflow(self, input: temporalio.client.StartWorkflowInput) -> Any:
        input.headers = with_header(input.headers, current() or from_args(input.args))
        return await super().start_workflow(input)

    async def signal_workflow(self, input: temporalio.client.SignalWorkflowInput) -> None:
        input.headers = with_header(input.headers, current())
        await super().signal_workflow(input)

    async def start_workflow_update(self, input: temporalio.client.StartWorkflowUpdateInput) -> Any:
        input.headers = with_header(input.headers, current())
        return await super().start_workflow_update(input)


class _ActivityInbound(temporalio.worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        cid = from_headers(input.headers) or from_args(input.args)
        name = activity.info().activity_type
        level = logging.DEBUG if name in QUIET_ACTIVITIES else logging.INFO
        with correlation(cid):
            started = time.perf_counter()
            try:
                result = await super().execute_activity(input)
            except BaseException as err:
                log.info("activity %s ended with %s", name, type(err).__name__,
                         extra={"activity": name, "workflow_id": activity.info().workflow_id})
                raise
            log.log(level, "activity %s done in %.0f ms", name, (time.perf_counter() - started) * 1000,
                    extra={"activity": name, "workflow_id": activity.info().workflow_id})
            return result


class _WorkflowInbound(temporalio.worker.WorkflowInboundInterceptor):
    """One per workflow run: holds the run's correlation id for its outbound calls."""

    cid: str | None = None

    def init(self, outbound: temporalio.worker.WorkflowOutboundInterceptor) -> None:
        super().init(_WorkflowOutbound(outbound, self))

    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        self.cid = from_headers(input.headers) or from_args(input.args)
        with correlation(self.cid):
            if not workflow.unsafe.is_replaying():
                info = workflow.info()
                log.info("workflow %s started", info.workflow_type,
                         extra={"workflow_id": info.workflow_id})
            return await super().execute_workflow(input)

    async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
        with correlation(from_headers(input.headers) or self.cid):
            await super().handle_signal(input)

    async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
        with correlation(from_headers(input.headers) or self.cid):
            return await super().handle_update_handler(input)


class _WorkflowOutbound(temporalio.worker.WorkflowOutboundInterceptor):
    def __init__(self, next: temporalio.worker.WorkflowOutboundInterceptor, run: _WorkflowInbound) -> None:
        super().__init__(next)
        self.run = run

    def _cid(self) -> str | None:
        return current() or self.run.cid

    def start_activity(self, input: temporalio.worker.StartActivityInput) -> workflow.ActivityHandle[Any]:
        input.headers = with_header(input.headers, self._cid())
        return super().start_activity(input)

    def start_local_activity(self, input: temporalio.worker.StartLocalActivityInput
                             ) -> workflow.ActivityHandle[Any]:
        input.headers = with_header(input.headers, self._cid())
        return super().start_local_activity(input)

    async def start_child_workflow(self, input: temporalio.worker.StartChildWorkflowInput
                                   ) -> workflow.ChildWorkflowHandle[Any, Any]:
        input.headers = with_header(input.headers, self._cid())
        return await super().start_child_workflow(input)
