"""The one exception type of the tgraph package."""
import errno

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


def file_error(path: str, e: OSError) -> TgraphError:
    """A file the caller named that cannot be read, as a TgraphError naming it: NOT_FOUND
    for a missing one, PERMISSION_DENIED, and INVALID_ARGUMENT for a directory (one file,
    e.g. one module of an XLA dump folder, is what every reader takes) or anything else."""
    if isinstance(e, FileNotFoundError):
        return TgraphError(grpc.StatusCode.NOT_FOUND, f"{path}: no such file")
    if isinstance(e, IsADirectoryError) or e.errno == errno.EISDIR:
        return invalid(f"{path}: a directory, not a file: give one file of it (one module of an XLA dump, "
                       "e.g. DIR/module_0042.jit_step.before_optimizations.txt)")
    if isinstance(e, PermissionError):
        return TgraphError(grpc.StatusCode.PERMISSION_DENIED, f"{path}: permission denied")
    return invalid(f"{path}: cannot be read ({e.strerror or e})")
