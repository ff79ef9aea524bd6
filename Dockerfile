# syntax=docker/dockerfile:1
# The neardup container image: a build stage with the Rust toolchain, and a slim runtime stage
# holding only the binary, run as the unprivileged user 10001 (the uid the Helm chart's
# security context expects). Build from the repository root:
#   docker build -t neardup:0.1.0 .
ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
# librdkafka is compiled from source by the rdkafka crate; TLS and SCRAM link OpenSSL.
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake g++ make perl pkg-config libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY schemas schemas
COPY topology topology
COPY consumer consumer
COPY tests tests
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin neardup \
 && install -D target/release/neardup /out/neardup

FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 neardup \
 && useradd --system --uid 10001 --gid neardup --home-dir /var/lib/neardup --shell /usr/sbin/nologin neardup \
 && install -d -o neardup -g neardup /var/lib/neardup \
 && install -d /etc/neardup
COPY --from=build /out/neardup /usr/local/bin/neardup
COPY consumer/neardup.example.toml /etc/neardup/neardup.example.toml
USER 10001:10001
WORKDIR /var/lib/neardup
# /metrics, /healthz, /readyz and /clusters when http_listen is 0.0.0.0:9090
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/neardup"]
CMD ["run", "--config", "/etc/neardup/neardup.toml"]
