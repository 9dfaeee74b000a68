"""The exchange's wire, without I/O: order bodies, response parsing, errors, the retry policy.

DISPATCH.md §5 as data and pure functions, so every byte and every error text is tested without a
socket. ``executor.exchange.orders.transport`` re-exports the public names; callers import them from
there.
"""

from __future__ import annotations

import http
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson

from executor.recording.orders.terms import GOOD_TILL_CANCELED
from executor.recording.rows import OrderStatus

if TYPE_CHECKING:
    import httpx

API_PREFIX: Final = "/trade-api/v2"
"""The REST API's base path: every signed path starts with it."""
ORDER_PATH: Final = "/trade-api/v2/portfolio/events/orders"
BALANCE_PATH: Final = "/trade-api/v2/portfolio/balance"
POSITIONS_PATH: Final = "/trade-api/v2/portfolio/positions"
ORDERS_PATH: Final = "/trade-api/v2/portfolio/orders"
"""``GET``: the account's orders, filtered and paged (reconciliation asks it about one order)."""
BATCH_CANCEL_PATH: Final = "/trade-api/v2/portfolio/events/orders/batched"
"""``DELETE``: cancel a batch of orders, V2 response shape (``batch-cancel-orders-v2.yaml``)."""
ORDER_GROUP_CREATE_PATH: Final = "/trade-api/v2/portfolio/order_groups/create"
"""``POST``: a new order group with a contracts limit (``create-order-group.yaml``)."""
ORDER_GROUPS_PATH: Final = "/trade-api/v2/portfolio/order_groups"
"""One group is ``{ORDER_GROUPS_PATH}/{id}`` (``GET``), ``/trigger`` and ``/reset`` (``PUT``)."""
LIMITS_PATH: Final = "/trade-api/v2/account/limits"
"""``GET``: the account's read and write token buckets (``get-account-api-limits.yaml``)."""
ENDPOINT_COSTS_PATH: Final = "/trade-api/v2/account/endpoint_costs"
"""``GET``: endpoints whose token cost is not the default (``list-non-default-endpoint-costs``)."""
USER_DATA_TIMESTAMP_PATH: Final = "/trade-api/v2/exchange/user_data_timestamp"
"""``GET``: when the data behind the orders list was last validated (``as_of_time``): what a
lookup that did not find an order can conclude from."""
JSON_CONTENT_TYPE: Final = "application/json"
"""``Content-Type`` of a request with a body (an order, a cancel, a group call)."""

ORDER_EXISTS_STATUS: Final = 409
"""Kalshi's answer to an order whose ``client_order_id`` it already has ("already exists"): the
order was placed, by an earlier attempt or an earlier delivery of this one."""

MAX_ERROR_TEXT_CHARS: Final = 1000
"""An error body is quoted up to this many characters: a proxy's HTML page is not an audit row."""


@dataclass(frozen=True, slots=True)
class OrderSpec:
    """One order's fields, already in wire form; ``order_body`` turns it into the exact bytes.

    ``post_only`` is not a field: it is true exactly when ``time_in_force`` is
    ``good_till_canceled`` (DISPATCH.md §4 step 3). ``cancel_order_on_pause`` and
    ``order_group_id`` (issue 22, [ours]) are sent only when set: None leaves the §5 body as it was.
    """

    ticker: str
    client_order_id: str
    side: Literal["bid", "ask"]
    count: int
    price: str
    time_in_force: str
    self_trade_prevention_type: str
    exchange_index: int
    cancel_order_on_pause: bool | None = None
    order_group_id: str | None = None


def order_body(spec: OrderSpec) -> bytes:
    """The compact JSON body of DISPATCH.md §5, keys in the order the exchange documents.

    orjson keeps a dict literal's insertion order, which is the §5 order written out below; the
    two keys issue 22 added follow ``exchange_index`` when set, so a body without them is §5's
    byte for byte. Golden tests hold both.

    Raises:
        ValueError: ``count`` is below 1 (the exchange and the audit CHECK both refuse it).
    """
    if spec.count < 1:
        raise ValueError(f"order count must be >= 1, got {spec.count}")
    fields: dict[str, object] = {
        "ticker": spec.ticker,
        "client_order_id": spec.client_order_id,
        "side": spec.side,
        "count": f"{spec.count}.00",
        "price": spec.price,
        "time_in_force": spec.time_in_force,
        "self_trade_prevention_type": spec.self_trade_prevention_type,
        "post_only": spec.time_in_force == GOOD_TILL_CANCELED,
        "exchange_index": spec.exchange_index,
    }
    if spec.cancel_order_on_pause is not None:
        fields["cancel_order_on_pause"] = spec.cancel_order_on_pause
    if spec.order_group_id is not None:
        fields["order_group_id"] = spec.order_group_id
    return orjson.dumps(fields)


@dataclass(slots=True)
class OrderStamps:
    """``perf_counter_ns`` stamps of the current attempt (None = not reached) and attempts made.

    The stamps are reset at the start of every attempt (:meth:`reset`), so a retried order reports
    the attempt that resolved it, never a mix of two. ``wire_ns`` is taken once the request's last
    byte was handed to the kernel; ``signature`` says how the attempt got its signature
    (``"presigned"`` from the pool made ahead, ``"inline"`` signed in the fire, None = not yet).
    """

    sign_start_ns: int | None = None
    sign_end_ns: int | None = None
    sent_ns: int | None = None
    ack_ns: int | None = None
    attempts: int = 0
    maybe_placed: bool = False
    """Set once any attempt failed in a way that may have placed the order (a timeout after
    the request may have been written, a connection lost after sending, a 5xx): the order's
    outcome is then unknown unless a later attempt succeeds, and only the exchange can say."""
    wire_ns: int | None = None
    signature: str | None = None

    def reset(self) -> None:
        """Forget the previous attempt's stamps (``attempts`` is kept)."""
        self.sign_start_ns = self.sign_end_ns = self.sent_ns = self.ack_ns = self.wire_ns = None
        self.signature = None


class ExchangeError(Exception):
    """A request failed; ``str(error)`` is the DISPATCH.md §5 text (it lands in ``error_message``).

    Attributes:
        status: the HTTP status, or None when no response came (connection error, timeout).
        maybe_placed: whether the exchange may have acted on the request anyway: by default
            true for a 5xx and false otherwise (a 4xx or a 429 is a definite refusal); the
            transport says so explicitly where no status came.
    """

    def __init__(
        self, text: str, *, status: int | None = None, maybe_placed: bool | None = None
    ) -> None:
        super().__init__(text)
        self.status = status
        if maybe_placed is None:
            maybe_placed = status is not None and status >= 500
        self.maybe_placed = maybe_placed


INTENT_NOT_RECORDED: Final = "intent record not written, order not sent: "
"""How the ``error`` row of an order stopped by a failed intent record begins (then the cause)."""


class IntentNotRecorded(ExchangeError):
    """The order's intent record could not be written, so it was not sent (a definite error);
    its text is :data:`INTENT_NOT_RECORDED` and the cause."""

    def __init__(self, cause: str) -> None:
        super().__init__(INTENT_NOT_RECORDED + cause)


class ExchangeAmbiguous(ExchangeError):
    """The request may have reached the exchange but no answer came: the outcome is unknown, so
    ``maybe_placed`` is true unless the raiser knows the request never left (e.g. a connect
    timeout). Reconciliation with the exchange decides it
    (``executor.exchange.follow.reconcile``)."""

    def __init__(
        self, text: str, *, status: int | None = None, maybe_placed: bool | None = True
    ) -> None:
        super().__init__(text, status=status, maybe_placed=maybe_placed)


class ExchangeTimeout(ExchangeAmbiguous):
    """No response within the budget. Never retried: the order may have been placed."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which failures an order retries, how often, and how long it waits (DISPATCH.md §5).

    Delay before attempt k+1: ``min(max_delay_s, base_delay_s * 2**(k-1)) * (0.5 + jitter/2)``
    with ``jitter`` uniform in [0, 1). Connection errors (no status) are always retryable;
    timeouts and other ambiguous outcomes (:class:`ExchangeAmbiguous`) never are.
    """

    max_attempts: int = 3
    retry_statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    base_delay_s: float = 0.25
    max_delay_s: float = 2.0

    def retryable(self, error: ExchangeError) -> bool:
        """Whether ``error`` may be retried (a timeout or another ambiguous outcome never)."""
        if isinstance(error, ExchangeAmbiguous):
            return False
        return error.status is None or error.status in self.retry_statuses

    def delay_s(self, attempt: int, jitter: float) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based), for ``jitter`` in [0, 1)."""
        return min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1)) * (0.5 + jitter / 2)


DEFAULT_RETRY: Final = RetryPolicy()


def error_text(status: int, reason: str, body: bytes) -> str:
    """The DISPATCH.md §5 text for a failed response: the exchange's code and message if given.

    Three body shapes are read: the published ``ErrorResponse`` (``code``, ``message`` and
    optional ``details`` at the top level), the same object nested under ``"error"``, and
    ``{"error": "text"}`` (the published 429 example). ``"{status} {code}: {message}"`` when a
    code is given, ``"{status} {reason}: {message}"`` when only a message is; anything else is
    quoted as it came, cut at ``MAX_ERROR_TEXT_CHARS``.
    """
    try:
        payload = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        payload = None
    if isinstance(payload, dict):
        nested = payload.get("error")
        if isinstance(nested, dict):
            payload = nested
        elif isinstance(nested, str) and nested.strip():
            payload = {"message": nested}
        described = _described_error(payload)
        if described is not None:
            code, message = described
            return _cut(f"{status} {code or reason}: {message}" if message else f"{status} {code}")
    text = body.decode("utf-8", errors="replace").strip()
    return _cut(f"{status} {reason}: {text}" if text else f"{status} {reason}")


def _described_error(payload: dict[str, Any]) -> tuple[str, str] | None:
    """(code, message with its details) of an ``ErrorResponse``-shaped object; None if it has
    neither a string code nor a string message."""
    code, message, details = (payload.get(key) for key in ("code", "message", "details"))
    code = code.strip() if isinstance(code, str) else ""
    message = message.strip() if isinstance(message, str) else ""
    if not (code or message):
        return None
    if isinstance(details, str) and details.strip():
        message = f"{message} ({details.strip()})" if message else details.strip()
    return code, message


def _cut(text: str) -> str:
    if len(text) > MAX_ERROR_TEXT_CHARS:
        return text[:MAX_ERROR_TEXT_CHARS] + "..."
    return text


def parse_response(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a 2xx httpx response (``{}`` when empty); see :func:`parse_answer`.

    Raises:
        ExchangeError: a non-2xx status (§5 text), or a 2xx body that is not a JSON object.
    """
    return parse_answer(response.status_code, response.reason_phrase, response.content)


def parse_answer(status: int, reason: str, body: bytes) -> dict[str, Any]:
    """The JSON object of a 2xx answer (``{}`` when empty); anything else raises.

    ``reason`` is the server's reason phrase; an empty one is replaced by the standard phrase so
    the §5 text stays readable.

    Raises:
        ExchangeError: a non-2xx status (§5 text), or a 2xx body that is not a JSON object.
    """
    reason = reason or _standard_reason(status)
    if not 200 <= status < 300:
        raise ExchangeError(error_text(status, reason, body), status=status)
    if not body.strip():
        return {}
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        snippet = body[:200].decode("utf-8", errors="replace")
        raise ExchangeError(
            f"{status} {reason}: response is not JSON: {snippet}", status=status, maybe_placed=True
        ) from None
    if not isinstance(payload, dict):
        # A 2xx the exchange sent is an order it took; what became of it is for it to say.
        raise ExchangeError(
            f"{status} {reason}: response is not a JSON object", status=status, maybe_placed=True
        )
    return payload


def parse_order_answer(status: int, reason: str, body: bytes) -> dict[str, Any]:
    """:func:`parse_answer` for an order: a 409 ("already exists") raises an error that says the
    order may be placed (it is, unless the exchange lies), so it is looked up, never re-sent.

    Raises:
        ExchangeError: as :func:`parse_answer`; ``maybe_placed`` for a 409.
    """
    try:
        return parse_answer(status, reason, body)
    except ExchangeError as error:
        if error.status == ORDER_EXISTS_STATUS:
            error.maybe_placed = True
        raise


def _standard_reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def parse_position(entry: object) -> tuple[str, float]:
    """(ticker, open contracts) of one ``market_positions`` entry: ``abs(float(position_fp))``.

    Raises:
        ExchangeError: the entry is not an object with a string ticker and a numeric position.
    """
    if not isinstance(entry, dict):
        raise ExchangeError(f"positions response: entry is not an object: {entry!r:.200}")
    try:
        ticker = entry["ticker"]
        contracts = abs(float(entry["position_fp"]))
    except (KeyError, TypeError, ValueError):
        raise ExchangeError(f"positions response: malformed entry {entry!r:.200}") from None
    if not isinstance(ticker, str):
        raise ExchangeError(f"positions response: ticker is not a string: {entry!r:.200}")
    return ticker, contracts


def order_payload(response: dict[str, Any]) -> dict[str, Any]:
    """The order object of a response: the response itself, or its ``order`` member if nested."""
    nested = response.get("order")
    if "order_id" not in response and isinstance(nested, dict):
        return nested
    return response


def parse_fill_count(value: object) -> float | None:
    """``fill_count`` as a number: a fixed-point string or a bare number; None if unparseable."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        parsed = float(value)
    except ValueError:
        return None
    return parsed if math.isfinite(parsed) else None


def has_order(response: dict[str, Any]) -> bool:
    """Whether a 2xx answer carries an order (an ``order_id``): Kalshi has answered 2xx with an
    error object and no order, which says nothing about whether the order was placed."""
    order_id = order_payload(response).get("order_id")
    return isinstance(order_id, str) and bool(order_id)


def order_status(response: dict[str, Any], time_in_force: str) -> OrderStatus:
    """DISPATCH.md §4 step 6 (amended for issue 21): the order's status from the exchange's answer.

    No parseable ``fill_count``: ``submitted``; a fill: ``filled``; nothing filled: ``accepted``
    for a good_till_canceled order while contracts remain (or the answer does not say), else
    ``canceled`` (a good_till_canceled order with nothing remaining was cancelled at placement).
    """
    payload = order_payload(response)
    fill_count = parse_fill_count(payload.get("fill_count"))
    if fill_count is None:
        return OrderStatus.SUBMITTED
    if fill_count > 0:
        return OrderStatus.FILLED
    if time_in_force != GOOD_TILL_CANCELED:
        return OrderStatus.CANCELED
    remaining = parse_fill_count(payload.get("remaining_count"))
    if remaining is not None and remaining <= 0:
        return OrderStatus.CANCELED  # cancelled at placement (post_only crossing, say)
    return OrderStatus.ACCEPTED


def verbatim_fill(value: object) -> str | None:
    """A fill column as stored: strings as sent, bare numbers stringified, anything else NULL."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None
