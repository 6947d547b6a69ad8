#!/bin/sh
# Installing velero-wasm with the velero CLI. Every command here is checked by tests/install.rs (the
# image reference, the plugin directory, the environment names); replace IMAGE with the registry you
# pushed the image to (`make image` builds it).
set -eu

IMAGE=registry.example.com/velero-wasm/velero-wasm:0.1.0

# A new installation: velero-wasm beside the object-store plugin of your provider. `--plugins` takes
# a comma-separated list of images; each becomes an init container that copies its plugin into
# Velero's plugin directory (mounted at /target in the init container).
velero install \
    --provider aws \
    --plugins "velero/velero-plugin-for-aws:v1.13.1,$IMAGE" \
    --bucket my-backups \
    --secret-file ./credentials-velero

# An existing installation: add the init container to the Velero Deployment.
velero plugin add "$IMAGE"

# Choose the stock modules (default: all). Beside upstream's kubevirt-velero-plugin, for instance, load
# only HyperShift's (docs/migration.md says which names clash).
kubectl -n velero set env deployment/velero VELERO_WASM_STOCK=hcp,agent

# Optional: export call metrics to an OpenTelemetry collector (OTLP/HTTP; README "Metrics").
#   kubectl -n velero set env deployment/velero OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector.observability:4318

# Velero 1.14 refuses plugins that list ItemBlockAction: list every other kind.
kubectl -n velero set env deployment/velero \
    VELERO_WASM_KINDS=BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction
