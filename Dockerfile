# tgraph: one image with tgraph-server (the entrypoint), tgraph-train, tgraph-eval,
# tgraph-client, tgraph-synth and tgraph-featurize (XLA HLO modules -> TpuGraphs files).
#
#   docker build -t tgraph:dev --build-arg TGRAPH_GIT_COMMIT="$(git rev-parse --short=12 HEAD)" .
#   docker run --rm -p 50051:50051 -p 9090:9090 -v "$PWD/registry:/var/lib/tgraph/registry:ro" tgraph:dev
#   docker run --rm --entrypoint tgraph-train tgraph:dev --help
#
# Build stage: the same install script as a developer machine (without --test: the tests'
# Python environment from PyPI stays out of the image), a Release build.
FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/install-deps scripts/select-openblas scripts/
RUN scripts/install-deps && rm -rf /var/lib/apt/lists/*
COPY . .
# The context has no .git (.dockerignore): --version and tgraph_build_info name this commit.
ARG TGRAPH_GIT_COMMIT=unknown
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /build -j "$(nproc)" --target tgraph-server tgraph-train tgraph-eval tgraph-client tgraph-synth tgraph-featurize \
 && mkdir -p /opt/tgraph/bin \
 && cp /build/server/tgraph-server /build/model/train/tgraph-train /build/model/train/tgraph-eval \
       /build/client/tgraph-client /build/model/synth/tgraph-synth /build/model/hlo/tgraph-featurize /opt/tgraph/bin/ \
 && strip /opt/tgraph/bin/* \
 && scripts/runtime-packages /opt/tgraph/bin/* > /opt/tgraph/runtime-packages.txt \
 && cp scripts/select-openblas /opt/tgraph/

# Runtime stage: only the packages that provide the binaries' shared libraries
# (computed in the build stage from ldd), OpenBLAS selected as the BLAS, no compilers.
FROM debian:bookworm-slim AS runtime
COPY --from=build /opt/tgraph /opt/tgraph
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(cat /opt/tgraph/runtime-packages.txt) \
 && /opt/tgraph/select-openblas \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 tgraph \
 && useradd --uid 10001 --gid tgraph --no-create-home --home-dir /var/lib/tgraph --shell /usr/sbin/nologin tgraph \
 && mkdir -p /var/lib/tgraph/registry \
 && chown -R tgraph:tgraph /var/lib/tgraph
ENV PATH=/opt/tgraph/bin:$PATH
# The model registry: mounted read-only by servers, read-write by the trainer's publish step.
VOLUME /var/lib/tgraph/registry
# gRPC (tgraph.v1.Ranker, grpc.health.v1, reflection) and Prometheus /metrics.
EXPOSE 50051 9090
USER 10001:10001
# Liveness: the process answers gRPC, with or without a model (docs/api.md, Health).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
  CMD ["tgraph-client", "health", "--server", "127.0.0.1:50051", "--service", "liveness"]
ENTRYPOINT ["tgraph-server"]
CMD ["--registry=/var/lib/tgraph/registry", "--address=0.0.0.0:50051", "--metrics_address=0.0.0.0:9090"]
