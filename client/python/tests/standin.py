"""A stand-in for the client tgraph.triton asks, so that its Triton tests choose the
model's order and scores without a server: one model, whose search answers what the
test set."""
import contextlib


class Space:
    collection = "tile@test"
    tile_space = ('{"block_m": [32, 64, 128, 256], "block_n": [32, 64, 128, 256], "block_k": [32, 64], '
                  '"num_warps": [4, 8], "num_stages": [3]}')


class Found:
    def __init__(self, order, scores):
        self.tiles, self.scores = order, scores


class StandIn:
    """The client tgraph.triton asks: one model whose order and scores the test sets;
    `searches` counts what it was asked."""
    _address = "stand-in"

    def __init__(self, order, scores):
        self.found = Found(order, scores)
        self.searches = []

    def models(self):
        return [Space()]

    def search_tiles(self, collection, module, results=0, kernel=None):
        self.searches.append(module.name)
        return self.found

    def deadline(self, seconds, retry_busy=False):
        return contextlib.nullcontext(self)

    def close(self):
        pass


class Tensor:
    """What the autotuner and the pruner read of a tensor: dtype and shape."""

    def __init__(self, dtype, *shape):
        self.dtype, self.shape = dtype, shape


def name(t):
    return f"{t[0]}x{t[1]}x{t[2]} w{t[3]} s{t[4]}"
