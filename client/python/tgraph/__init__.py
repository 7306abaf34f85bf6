"""tgraph: rank tensor-compiler configurations with a tgraph-server, from Python.

    import tgraph
    with tgraph.Client("127.0.0.1:50051") as client:
        ranking = client.rank("layout:xla:random", "unet_3d.npz", top_k=5)
        print(ranking.order)

docs/python.md has the whole API and an autotuner loop."""
from ._client import (AppliedLayouts, Client, ConfigurableNode, EntryLayout, HloModule, LayoutGroup,
                      MeasurementReceipt, ModelInfo, Proposals, Provenance, Ranking, Registration, TileKernel, TilePriorInfo,
                      TileProposals)
from ._errors import TgraphError
from ._graph import Graph, load_graph

__version__ = "0.1.0"
__all__ = ["AppliedLayouts", "Client", "ConfigurableNode", "EntryLayout", "Graph", "HloModule", "LayoutGroup",
           "MeasurementReceipt", "ModelInfo", "Proposals", "Provenance", "Ranking", "Registration", "TgraphError",
           "TileKernel", "TilePriorInfo", "TileProposals", "load_graph"]
