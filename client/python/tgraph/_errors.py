"""The one exception type of the tgraph package."""
import grpc


class TgraphError(Exception):
    """A failed call or invalid input: `code` is the grpc.StatusCode (the contract to
    branch on, docs/api.md), `message` says what was wrong and where."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


def invalid(message: str) -> TgraphError:
    """INVALID_ARGUMENT for input rejected before any call, as the server would reject it."""
    return TgraphError(grpc.StatusCode.INVALID_ARGUMENT, message)
