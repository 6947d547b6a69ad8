# The velero-wasm plugin image: the static binary at /plugins/velero-wasm, nothing else. Its
# entrypoint is the init container Velero's plugin convention expects: it copies the binary into the
# plugin directory mounted at /target and exits (`velero-wasm install-plugin`), so the image needs no
# shell and no cp. The binary is built before the image (no builder stage: `make image` builds it).
FROM scratch

# The static (musl) binary to ship, stripped, relative to the build context (`make image` puts it
# there; .dockerignore lets nothing else in).
ARG BINARY=target/image/velero-wasm-amd64
# The release: the workspace version (Cargo.toml); `make image` passes it.
ARG VERSION=0.1.0
# Where the source is; `make image` passes the workspace's `repository` (Cargo.toml).
ARG SOURCE=

LABEL org.opencontainers.image.title="velero-wasm" \
      org.opencontainers.image.description="Velero item actions as sandboxed WebAssembly components" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY ${BINARY} /plugins/velero-wasm

USER 65532:65532

ENTRYPOINT ["/plugins/velero-wasm", "install-plugin", "/target"]
