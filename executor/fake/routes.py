"""The fake exchange's endpoints as data: which request is answered by which account method.

A :class:`Route` names a method, a path template (``{name}`` segments match one path segment
each: ``/trade-api/v2/portfolio/orders/{order_id}``), the account method that answers it and the
success status. :class:`RouteTable` finds the route of a request or says why there is none, in
the published ``ErrorResponse`` terms the account answers with (404 for an unknown path, 405 for a
known path asked with another method). Adding an endpoint to the fake is one line in
``executor.fake.book.account.ROUTES`` and one method on the account.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


class ErrorReply(Exception):
    """Answer the current request with ``status`` and a published ``ErrorResponse`` body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class Route:
    """One endpoint.

    Attributes:
        method: the HTTP method (``GET``, ``POST``, ``DELETE``, ``PUT``).
        template: the path, ``{name}`` marking a segment that is a parameter.
        handler: the name of the account method that answers (called with the path's
            parameters, the query string and the body).
        status: the status of a successful answer.
    """

    method: str
    template: str
    handler: str
    status: int = 200
    _parts: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_parts", tuple(self.template.split("/")))

    def match(self, path: str) -> dict[str, str] | None:
        """The path's parameters when ``path`` has this route's shape, else None."""
        parts = path.split("/")
        if len(parts) != len(self._parts):
            return None
        params: dict[str, str] = {}
        for pattern, part in zip(self._parts, parts, strict=True):
            if pattern.startswith("{") and pattern.endswith("}"):
                if not part:
                    return None
                params[pattern[1:-1]] = part
            elif pattern != part:
                return None
        return params


class RouteTable:
    """Every route of the fake, looked up per request."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = tuple(routes)

    def find(self, method: str, path: str) -> tuple[Route, dict[str, str]]:
        """The route answering ``method path`` and the path's parameters.

        Raises:
            ErrorReply: 404 when no route has this path, 405 when routes have it with other
                methods.
        """
        allowed: list[str] = []
        for route in self.routes:
            params = route.match(path)
            if params is None:
                continue
            if route.method == method:
                return route, params
            allowed.append(route.method)
        if allowed:
            raise ErrorReply(405, "method_not_allowed", f"{path} takes {', '.join(allowed)}")
        raise ErrorReply(404, "not_found", f"no endpoint {path}")

    def endpoints(self) -> tuple[tuple[str, str], ...]:
        """Every ``(template, method)`` served, in the table's order."""
        return tuple((route.template, route.method) for route in self.routes)


__all__ = ["ErrorReply", "Route", "RouteTable"]
