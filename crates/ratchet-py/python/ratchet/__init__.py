"""Ratchet: durable workflows, a task queue and an event store on PostgreSQL or SQLite,
with the hot path in Rust.

    import asyncio, ratchet

    @ratchet.task
    async def send_email(to):
        return f"sent to {to}"

    async def main():
        client = await ratchet.connect("app.db")
        task_id = await client.enqueue("send_email", "ada@example.com")
        async with ratchet.Worker("app.db"):
            print((await client.task_wait(task_id))["output"])

    asyncio.run(main())
"""

import atexit as _atexit

from ._ratchet import (
    ActivityFailed,
    AlreadyExists,
    AppendConflict,
    Cancelled,
    ChildFailed,
    Closed,
    ContinueAsNew,
    Failed,
    InvalidInput,
    NotFound,
    RatchetError,
    Refused,
    StoreError,
    Timeout,
    UnknownName,
)
from .client import Client, SyncClient, connect
from .worker import TaskInfo, Worker, task
from .workflow import Step, WorkflowContext, activity, gather, race, workflow

from ._ratchet import quiesce as _quiesce

# Lets the runtime's threads finish handing results to Python before the interpreter
# finalizes (see _ratchet.quiesce).
_atexit.register(_quiesce)

__all__ = [
    "ActivityFailed", "Cancelled", "ChildFailed", "ContinueAsNew", "Step", "WorkflowContext",
    "activity", "gather", "race", "workflow",
    "AlreadyExists", "AppendConflict", "Client", "Closed", "Failed", "InvalidInput", "NotFound",
    "RatchetError", "Refused", "StoreError", "SyncClient", "TaskInfo", "Timeout", "UnknownName",
    "Worker", "connect", "task",
]
