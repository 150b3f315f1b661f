"""Our one ASGI layer around every HTTP request: the jobs that see each request and
its answer, composed so a request passes one wrapper of ours, not four.

Each job's logic lives in its own module; this one only composes them:

- the answer's headers (:mod:`palimpsest.api._headers`): ``nosniff`` on every answer,
  errors and streams included;
- the metrics (:mod:`palimpsest.api._metrics`): every request counted, timed and
  logged, and a body over ``max_request_bytes`` answered 413;
- the writes announced (:mod:`palimpsest.api._waiting`) to this process's event
  streams, once each has answered;
- the JSON bodies (:mod:`palimpsest.api._json_bodies`): parsed strictly before a
  route reads them, a refused one answered with its problem document.

They were four pure ASGI middlewares, each wrapping ``send`` again, so each message
of each answer passed four wrappers of ours (issue 48: under load the middleware
stack, ours and the framework's, held 17.5% of the GIL, and sending through it
13.8%). The order is theirs: the header is put on every answer that leaves here
(the 413 and the refused bodies too), the metrics see the JSON check's time and
answer, and a body is counted against the limit as the JSON check reads it.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from palimpsest.api._headers import sending_nosniff, with_nosniff
from palimpsest.api._json_bodies import read_json_body, reads_json_body, refuse_body
from palimpsest.api._metrics import BodySize, BodyTooLargeError, Metrics, record_request
from palimpsest.api._waiting import announce_write, is_write
from palimpsest.domain.errors import InvalidInputError
from palimpsest.projections.views.publications import TenantWakers

__all__ = ["Edge"]


class Edge:
    """Add ``nosniff`` to every HTTP answer, count, time and log every request, refuse
    a body over ``max_request_bytes`` with 413, announce each write that succeeded to
    ``writes``, and parse every JSON body strictly before its route reads it.

    Pure ASGI (not ``BaseHTTPMiddleware``), so streamed answers are not buffered.
    """

    def __init__(
        self, app: ASGIApp, *, metrics: Metrics, max_request_bytes: int, writes: TenantWakers
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes
        self.writes = writes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        size = BodySize(self.max_request_bytes)
        if size.declared_too_large(scope):
            await size.too_large(scope, receive, sending_nosniff(send))
            record_request(self.metrics, scope, 413, started)
            return
        status = 500  # unless an answer starts
        announcing = is_write(scope)
        replayed: list[Message] = []  # the body the JSON check read, for the route

        async def counting_receive() -> Message:
            if replayed:
                return replayed.pop()
            message = await receive()
            size.add(message)
            return message

        async def edge_send(message: Message) -> None:
            nonlocal status
            starts = message["type"] == "http.response.start"
            # Past the limit, the app turned the error raised while it read the body
            # into an answer of its own (FastAPI: 400 "error parsing the body"): the
            # 413 sent below replaces it.
            if not size.exceeded:
                if starts:
                    status = message["status"]
                    await send(with_nosniff(message))
                else:
                    await send(message)
            if starts and announcing:
                announce_write(self.writes, scope, message["status"])

        try:
            if reads_json_body(scope):
                try:
                    replayed.append(await read_json_body(scope, counting_receive))
                except InvalidInputError as e:
                    await refuse_body(scope, e, edge_send)
                else:
                    await self.app(scope, counting_receive, edge_send)
            else:
                await self.app(scope, counting_receive, edge_send)
        except BodyTooLargeError:
            pass
        except Exception:
            # Unhandled: Starlette's outermost middleware answers 500 after this
            # one. It is counted and logged like any other answer.
            record_request(self.metrics, scope, status, started)
            raise
        if size.exceeded:
            status = 413
            await size.too_large(scope, receive, sending_nosniff(send))
        record_request(self.metrics, scope, status, started)
